"""Plots for bench/mpi.sh: one PNG per figure family and method (shm, tcp).

    plot.py MEDIANS OUTDIR [TITLE-SUFFIX]

MEDIANS has lines "config name size median min max" (bench/mpi.sh writes it).
Families and files (METHOD = shm or tcp):
  mpi-latency-METHOD.png      one-way ping-pong latency ("lat"; on shm also
                              "lat_touch", the sender writing its buffer, dashed)
  mpi-bw-METHOD.png           streaming bandwidth ("bw")
  mpi-bibw-METHOD.png         bidirectional bandwidth ("bibw")
  mpi-rate-METHOD.png         message rate, window 64 ("rate")
  mpi-collectives-METHOD.png  Bcast, Allreduce, Reduce, Allgather, Alltoall
                              against the size, and Barrier as bars
Each line is the median of the runs with the min..max of the runs as a band.
A 0-byte message has no place on a log axis: it is drawn at 0.5 B, "0".
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MPIS = {
    "shm": [
        ("gw-shm", "gridwire (shm)", "C0", "o"),
        ("mpich-shm", "MPICH (default)", "C1", "s"),
        ("ompi-shm", "Open MPI (default)", "C2", "^"),
    ],
    "tcp": [
        ("gw-tcp", "gridwire (2 emulated hosts, tcp)", "C0", "o"),
        ("mpich-tcp", "MPICH (NOLOCAL, UCX tcp)", "C1", "s"),
        ("ompi-tcp", "Open MPI (btl tcp)", "C2", "^"),
    ],
}
RAW_TCP = [
    ("raw-spin", "raw TCP floor (busy-poll)", "k", "x"),
    ("raw-block", "raw TCP (blocking reads)", "0.5", "+"),
]
WHERE = {"shm": "2 ranks, one host", "tcp": "2 ranks, two emulated hosts (tcp)"}
NAMES = {0.5: "0", 1: "1", 8: "8", 64: "64", 512: "512", 4096: "4K", 32768: "32K", 262144: "256K", 1048576: "1M", 4194304: "4M"}
COLLS = ["bcast", "allreduce", "reduce", "allgather", "alltoall"]


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) != 6:
                continue
            try:
                size, med, lo, hi = int(p[2]), float(p[3]), float(p[4]), float(p[5])
            except ValueError:
                continue
            rows.setdefault((p[0], p[1]), []).append((size, med, lo, hi))
    return {k: sorted(v) for k, v in rows.items()}


def line(ax, pts, label, color, marker, style="-"):
    xs = [s if s > 0 else 0.5 for s, _, _, _ in pts]
    ax.plot(xs, [m for _, m, _, _ in pts], style, marker=marker, color=color, label=label, linewidth=1.4, markersize=5)
    ax.fill_between(xs, [lo for _, _, lo, _ in pts], [hi for _, _, _, hi in pts], color=color, alpha=0.12, linewidth=0)


def size_axis(ax, sizes, log_y=True):
    ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    ticks = sorted({s if s > 0 else 0.5 for s in sizes})
    ax.set_xticks(ticks)
    ax.set_xticklabels([NAMES.get(t, f"{t // 1024}K" if t >= 1024 else str(t)) for t in ticks], fontsize=7)
    ax.minorticks_off()
    ax.grid(True, which="major", linewidth=0.4, alpha=0.6)


def save(fig, out):
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    print(f"plot.py: wrote {out}", file=sys.stderr)


def simple(rows, method, key, ylabel, title, out, log_y=True):
    series = [(c, key, lab, col, mk, "-") for c, lab, col, mk in MPIS[method]]
    if key == "lat" and method == "shm":
        series += [(c, "lat_touch", lab + ", sender writes buffer", col, mk, "--") for c, lab, col, mk in MPIS[method]]
    if key == "lat" and method == "tcp":
        series += [(c, "lat", lab, col, mk, "-") for c, lab, col, mk in RAW_TCP]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    sizes = set()
    for cfg, k, label, color, marker, style in series:
        pts = rows.get((cfg, k), [])
        if pts:
            line(ax, pts, label, color, marker, style)
            sizes.update(s for s, _, _, _ in pts)
    if not sizes:
        plt.close(fig)
        return
    size_axis(ax, sizes, log_y)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    save(fig, out)


def collectives(rows, method, suffix, out):
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.5), dpi=100)
    drawn = 0
    for ax, key in zip(axes.flat, COLLS):
        sizes = set()
        for cfg, label, color, marker in MPIS[method]:
            pts = rows.get((cfg, key), [])
            if pts:
                line(ax, pts, label, color, marker)
                sizes.update(s for s, _, _, _ in pts)
        if sizes:
            drawn += 1
            size_axis(ax, sizes)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("bytes (per rank / pair)", fontsize=8)
        ax.set_ylabel("µs per call", fontsize=8)
    ax = axes.flat[5]
    bars = [(label, rows[(cfg, "barrier")][0], color) for cfg, label, color, _ in MPIS[method] if rows.get((cfg, "barrier"))]
    for i, (label, (_, med, lo, hi), color) in enumerate(bars):
        ax.bar(i, med, yerr=[[med - lo], [hi - med]], color=color, capsize=3)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([b[0].split(" ")[0] for b in bars], fontsize=8)
    ax.set_title("barrier", fontsize=9)
    ax.set_ylabel("µs per call", fontsize=8)
    if not drawn and not bars:
        plt.close(fig)
        return
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=3)
    fig.suptitle(f"MPI collectives (median; band = min..max of runs), {WHERE[method]}\n{suffix}", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out)
    plt.close(fig)
    print(f"plot.py: wrote {out}", file=sys.stderr)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = load(sys.argv[1])
    outdir = sys.argv[2]
    suffix = sys.argv[3] if len(sys.argv) > 3 else ""
    band = "median; band = min..max of runs"
    for method in MPIS:
        where = WHERE[method]
        simple(rows, method, "lat", f"one-way latency (µs), {band}", f"MPI ping-pong latency, {where}\n{suffix}", f"{outdir}/mpi-latency-{method}.png")
        simple(rows, method, "bw", f"bandwidth (MB/s), {band}", f"MPI streaming bandwidth (window 64), {where}\n{suffix}", f"{outdir}/mpi-bw-{method}.png")
        simple(rows, method, "bibw", f"MB/s, both ways summed; {band}", f"MPI bidirectional bandwidth (window 64 each way), {where}\n{suffix}", f"{outdir}/mpi-bibw-{method}.png")
        simple(rows, method, "rate", f"millions of messages/s, {band}", f"MPI message rate (osu_mbw_mr style, window 64), {where}\n{suffix}", f"{outdir}/mpi-rate-{method}.png", log_y=False)
        collectives(rows, method, suffix, f"{outdir}/mpi-collectives-{method}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
