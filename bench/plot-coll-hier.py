#!/usr/bin/env python3
"""Plot of bench/coll-hier.sh's figures as an SVG (standard library only).

    plot-coll-hier.py RUNS.txt ONE_WAY_MS OUT.svg

RUNS.txt holds coll_lat.c lines, "coll OP BYTES ROOT PLACEMENT:IMPL US"
(PLACEMENT "any" for the one-site job). One row of panels per placement and
operation group, time per call on a log scale against the message size;
the goal (1.3 x one-way delay + the in-site figure) is the dashed line.
"""
import math
import sys

SERIES = [
    ("gw-flat", "gridwire flat", "#1f77b4"),
    ("gw-hier", "gridwire hier", "#d62728"),
    ("mpich", "MPICH", "#2ca02c"),
    ("ompi", "Open MPI", "#9467bd"),
    ("goal", "goal (1.3 x delay + in site)", "#555555"),
]
PANELS = [
    ("bcast", "0"), ("bcast", "last"), ("reduce", "0"), ("reduce", "last"),
    ("allreduce", "0"), ("barrier", "0"), ("allgather", "0"), ("alltoall", "0"),
]
W, H = 260, 190          # one panel
ML, MT, MR, MB = 52, 28, 10, 34


def load(path):
    figs = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        f = line.split()
        if len(f) != 6 or f[0] != "coll" or ":" not in f[4]:
            continue
        place, impl = f[4].split(":", 1)
        try:
            us = float(f[5])
            size = int(f[2])
        except ValueError:
            continue
        root = "0" if f[3] == "0" else "last"
        figs[(place, impl, f[1], root, size)] = us
    return figs


def fmt_size(b):
    if b >= 1 << 20:
        return f"{b >> 20} MiB"
    if b >= 1024:
        return f"{b >> 10} KiB"
    return f"{b} B"


def panel(out, x0, y0, figs, place, op, root, oneway_us):
    sizes = sorted({k[4] for k in figs if k[0] == place and k[2] == op and k[3] == root})
    title = f"{op}" + (f", root {root}" if op in ("bcast", "reduce") else "")
    out.append(f'<text x="{x0 + W / 2}" y="{y0 + 16}" text-anchor="middle" font-size="12">{title}</text>')
    if not sizes:
        out.append(f'<text x="{x0 + W / 2}" y="{y0 + H / 2}" text-anchor="middle" font-size="11">no data</text>')
        return
    lines = {}
    for key, _, _ in SERIES:
        pts = []
        for s in sizes:
            if key == "goal":
                site = figs.get(("any", "gw-site", op, root, s))
                v = None if site is None else 1.3 * oneway_us + site
            else:
                v = figs.get((place, key, op, root, s))
            if v is not None and v > 0:
                pts.append((s, v))
        lines[key] = pts
    vals = [v for pts in lines.values() for _, v in pts]
    lo = 10 ** math.floor(math.log10(min(vals)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    if hi <= lo:
        hi = lo * 10
    pw, ph = W - ML - MR, H - MT - MB
    px, py = x0 + ML, y0 + MT

    def xpos(i):
        return px + (pw / 2 if len(sizes) == 1 else i * pw / (len(sizes) - 1))

    def ypos(v):
        return py + ph - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * ph

    out.append(f'<rect x="{px}" y="{py}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    d = math.log10(lo)
    while d <= math.log10(hi) + 1e-9:
        v = 10 ** d
        y = ypos(v)
        label = f"{v / 1000:g} ms" if v >= 1000 else f"{v:g} µs"
        out.append(f'<line x1="{px}" y1="{y:.1f}" x2="{px + pw}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{px - 3}" y="{y + 4:.1f}" text-anchor="end" font-size="9">{label}</text>')
        d += 1
    for i, s in enumerate(sizes):
        out.append(f'<text x="{xpos(i):.1f}" y="{py + ph + 14}" text-anchor="middle" font-size="9">{fmt_size(s) if op != "barrier" else ""}</text>')
    for key, _, colour in SERIES:
        pts = [(xpos(sizes.index(s)), ypos(v)) for s, v in lines[key]]
        if not pts:
            continue
        dash = ' stroke-dasharray="5,3"' if key == "goal" else ""
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>')
        for x, y in pts:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>')


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: plot-coll-hier.py RUNS.txt ONE_WAY_MS OUT.svg")
    figs = load(sys.argv[1])
    oneway_us = float(sys.argv[2]) * 1000
    places = [p for p in ("site", "rr") if any(k[0] == p for k in figs)]
    if not places:
        sys.exit("plot-coll-hier.py: no figures")
    cols = 4
    rows = [(p, PANELS[i:i + cols]) for p in places for i in range(0, len(PANELS), cols)]
    width, top = cols * W, 60
    height = top + len(rows) * (H + 22)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="14">Collective latency across sites (bench/coll-hier.sh), '
           f'one-way WAN delay {oneway_us / 1000:.2f} ms, time per call (log)</text>']
    x = 10
    for _, name, colour in SERIES:
        dash = ' stroke-dasharray="5,3"' if name.startswith("goal") else ""
        out.append(f'<line x1="{x}" y1="38" x2="{x + 22}" y2="38" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 26}" y="42" font-size="11">{name}</text>')
        x += 30 + 7 * len(name)
    y = top
    for place, panels in rows:
        out.append(f'<text x="6" y="{y + 12}" font-size="11" font-weight="bold">placement: {place}</text>')
        for i, (op, root) in enumerate(panels):
            panel(out, i * W, y + 8, figs, place, op, root, oneway_us)
        y += H + 22
    out.append("</svg>")
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
