"""Log-log latency plots for bench/mpi.sh, one PNG per method (shm, tcp).

    plot.py MEDIANS OUTDIR [TITLE-SUFFIX]

MEDIANS has lines "config name size median min max" (bench/mpi.sh writes it);
the plots show the median one-way latency of the "lat" rows against the
message size, with the min..max of the runs as a band. A 0-byte message has
no place on a log axis: it is drawn at 0.5 B and labelled "0".
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = {
    "shm": [
        ("gw-shm", "gridwire (shm)", "C0", "o"),
        ("mpich-shm", "MPICH (default)", "C1", "s"),
        ("ompi-shm", "Open MPI (default)", "C2", "^"),
    ],
    "tcp": [
        ("gw-tcp", "gridwire (2 emulated hosts, tcp)", "C0", "o"),
        ("mpich-tcp", "MPICH (NOLOCAL, UCX tcp)", "C1", "s"),
        ("ompi-tcp", "Open MPI (btl tcp)", "C2", "^"),
        ("raw-spin", "raw TCP floor (busy-poll)", "k", "x"),
        ("raw-block", "raw TCP (blocking reads)", "0.5", "+"),
    ],
}


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = {}
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) != 6 or p[1] != "lat":
                continue
            try:
                size, med, lo, hi = int(p[2]), float(p[3]), float(p[4]), float(p[5])
            except ValueError:
                continue
            rows.setdefault(p[0], []).append((size, med, lo, hi))
    suffix = sys.argv[3] if len(sys.argv) > 3 else ""
    for method, series in SERIES.items():
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        drawn = 0
        for cfg, label, color, marker in series:
            pts = sorted(rows.get(cfg, []))
            if not pts:
                continue
            xs = [s if s > 0 else 0.5 for s, _, _, _ in pts]
            ax.plot(xs, [m for _, m, _, _ in pts], marker=marker, color=color, label=label, linewidth=1.4, markersize=5)
            ax.fill_between(xs, [lo for _, _, lo, _ in pts], [hi for _, _, _, hi in pts], color=color, alpha=0.12, linewidth=0)
            drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = [0.5, 1, 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304]
        names = ["0", "1", "8", "64", "512", "4K", "32K", "256K", "1M", "4M"]
        ax.set_xticks(ticks)
        ax.set_xticklabels(names)
        ax.minorticks_off()
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("one-way latency (µs), median; band = min..max of runs")
        where = "2 ranks, one host" if method == "shm" else "2 ranks, two emulated hosts (tcp)"
        ax.set_title(f"MPI ping-pong latency, {where}\n{suffix}", fontsize=10)
        ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        out = f"{sys.argv[2]}/mpi-latency-{method}.png"
        fig.savefig(out)
        plt.close(fig)
        print(f"plot.py: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
