#!/usr/bin/env bash
# HPC Challenge 1.5.0 (issue 18's real application), also run by `make bench`:
# Debian's `hpcc` source package, built twice — with scripts/gwcc (gridwire)
# and with mpicc.mpich — and run with 4 ranks (N=3000, NB=100, P=Q=2) as a
# new user would, with all six of HPL's panel broadcasts (BCAST 0-5: 1rg,
# 1rM, 2rg, 2rM, Lng, LnM), OpenBLAS single-threaded:
#   gw:        gwrun -n 4 hpcc                      (one host: shm)
#   gw-2hosts: gwrun -n 4 --emulate-hosts 2 hpcc    (ranks 0-1 | 2-3: tcp between)
#   mpich:     mpiexec.mpich -n 4 hpcc              (one host)
#   mpich-tcp: the same with MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self (TCP
#              between all ranks, as bench/mpi.sh forces "two hosts")
# HPCC_RUNS (1) interleaved runs of each (HPCC_LABELS picks some of gw,
# gw-2hosts, mpich, mpich-tcp); per HPL variant the median Gflops,
# and gw / mpich. Every HPCC check must pass (the output's FAILED lines are
# counted and reported). The source is fetched once with apt-get source
# (deb-src of Debian 12, no system configuration changed) into
# bench/out/hpcc/src; libopenblas-dev is installed when missing (root).
# Markdown on stdout (also bench/out/hpcc/hpcc.md), progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REL=${REL:-target/release}
REL=$(cd "$REL" && pwd)
RUNS=${HPCC_RUNS:-1}
TIMEOUT=${HPCC_TIMEOUT:-600}
OUT=$ROOT/bench/out/hpcc
mkdir -p "$OUT/src"

skip() { echo "SKIPPED: bench/hpcc.sh: $*" >&2; exit 0; }
command -v mpicc.mpich >/dev/null || skip "mpicc.mpich not installed (libmpich-dev)"
if ! dpkg-query -W -f='${Status}' libopenblas-dev 2>/dev/null | grep -q "install ok installed"; then
    [ "$(id -u)" = 0 ] || skip "libopenblas-dev missing and not root to install it"
    echo "bench/hpcc.sh: installing libopenblas-dev" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev >&2 || skip "cannot install libopenblas-dev"
fi

# The source: Debian's orig tarball (its debian/ tarball is not needed: the
# build below is ours).
tarball=$OUT/src/hpcc_1.5.0.orig.tar.gz
if [ ! -s "$tarball" ]; then
    echo "bench/hpcc.sh: fetching the hpcc source package" >&2
    apt_dir=$OUT/src/apt
    mkdir -p "$apt_dir/lists/partial"
    echo "deb-src http://deb.debian.org/debian bookworm main" >"$apt_dir/src.list"
    opts=(-o "Dir::Etc::SourceList=$apt_dir/src.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o APT::Get::List-Cleanup=0)
    apt-get "${opts[@]}" -qq update >&2 || skip "apt-get update of deb-src failed"
    (cd "$OUT/src" && apt-get "${opts[@]}" -qq source --download-only hpcc >&2) || true
    [ -s "$tarball" ] || skip "could not download hpcc_1.5.0.orig.tar.gz"
fi

# build ARCH CC: an hpcc tree under $OUT/ARCH built with CC.
build() {
    local arch=$1 cc=$2 dir=$OUT/$1
    if [ -x "$dir/hpcc" ] && [ "$dir/hpcc" -nt "$tarball" ] && { [ "$arch" != gw ] || [ "$dir/hpcc" -nt "$REL/libmpi.so" ]; }; then
        return 0
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    tar -xzf "$tarball" -C "$dir" --strip-components=1
    cat >"$dir/hpl/Make.$arch" <<EOF
SHELL        = /bin/sh
CD           = cd
CP           = cp
LN_S         = ln -s
MKDIR        = mkdir
RM           = /bin/rm -f
TOUCH        = touch
ARCH         = $arch
TOPdir       = ../../..
INCdir       = \$(TOPdir)/include
BINdir       = \$(TOPdir)/bin/\$(ARCH)
LIBdir       = \$(TOPdir)/lib/\$(ARCH)
HPLlib       = \$(LIBdir)/libhpl.a
LAlib        = -lopenblas
HPL_INCLUDES = -I\$(INCdir) -I\$(INCdir)/\$(ARCH)
HPL_LIBS     = \$(HPLlib) \$(LAlib) -lm
HPL_DEFS     = -DHPL_CALL_CBLAS \$(HPL_INCLUDES)
CC           = $cc
CCNOOPT      = \$(HPL_DEFS)
CCFLAGS      = \$(HPL_DEFS) -O2
LINKER       = $cc
LINKFLAGS    = \$(CCFLAGS)
ARCHIVER     = ar
ARFLAGS      = r
RANLIB       = echo
EOF
    echo "bench/hpcc.sh: building hpcc for $arch" >&2
    (cd "$dir" && GW_MPI_LIBDIR=$REL make -s arch="$arch" >"$OUT/build-$arch.log" 2>&1) || {
        echo "bench/hpcc.sh: the $arch build failed: $(tail -5 "$OUT/build-$arch.log")" >&2; return 1; }
}
build gw "$ROOT/scripts/gwcc" || skip "hpcc does not build with gwcc (see $OUT/build-gw.log)"
build mpich mpicc.mpich || skip "hpcc does not build with mpicc.mpich (see $OUT/build-mpich.log)"

write_input() {
    cat >"$1/hpccinf.txt" <<'EOF'
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
3000         Ns
1            # of NBs
100          NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
2            Ps
2            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
6            # of broadcast
0 1 2 3 4 5  BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
EOF
}

# run LABEL I: one run in its own directory; HPL lines go to runs.txt as
# "LABEL VARIANT GFLOPS", the check count to checks.txt.
: >"$OUT/runs.txt"
: >"$OUT/checks.txt"
run() {
    local label=$1 i=$2 dir=$OUT/run-$1-$2 status=0
    rm -rf "$dir" && mkdir -p "$dir" && write_input "$dir"
    echo "bench/hpcc.sh: $label, run $i" >&2
    case $label in
        gw) (cd "$dir" && OPENBLAS_NUM_THREADS=1 timeout "$TIMEOUT" "$REL/gwrun" -n 4 "$OUT/gw/hpcc") >"$dir/out.log" 2>&1 || status=$? ;;
        gw-2hosts) (cd "$dir" && OPENBLAS_NUM_THREADS=1 timeout "$TIMEOUT" "$REL/gwrun" -n 4 --emulate-hosts 2 "$OUT/gw/hpcc") >"$dir/out.log" 2>&1 || status=$? ;;
        mpich) (cd "$dir" && OPENBLAS_NUM_THREADS=1 timeout "$TIMEOUT" mpiexec.mpich -n 4 "$OUT/mpich/hpcc") >"$dir/out.log" 2>&1 || status=$? ;;
        mpich-tcp) (cd "$dir" && OPENBLAS_NUM_THREADS=1 MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self timeout "$TIMEOUT" mpiexec.mpich -n 4 "$OUT/mpich/hpcc") >"$dir/out.log" 2>&1 || status=$? ;;
    esac
    local f=$dir/hpccoutf.txt
    if [ "$status" != 0 ] || [ ! -s "$f" ]; then
        echo "  $label run $i: exit $status: $(tail -3 "$dir/out.log" | tr '\n' ' ' | cut -c1-300)" >&2
        echo "$label $i exit=$status passed=0 failed=?" >>"$OUT/checks.txt"
        return 0
    fi
    awk -v l="$label" '/^T\/V/ { want = 2; next } want == 2 && /^WR/ { print l, $1, $7; want = 0 }' "$f" >>"$OUT/runs.txt"
    echo "$label $i exit=0 passed=$(grep -c PASSED "$f" || true) failed=$(grep -c FAILED "$f" || true)" >>"$OUT/checks.txt"
}
labels=${HPCC_LABELS:-gw gw-2hosts mpich mpich-tcp}
for i in $(seq "$RUNS"); do
    for l in $labels; do run "$l" "$i"; done
done

median() { sort -g | awk '{a[NR]=$1} END { if (NR) print a[int((NR+1)/2)]; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
{
    echo "HPCC 1.5.0, N=3000 NB=100 P=Q=2, 4 ranks, OpenBLAS 1 thread; HPL Gflops, median of $RUNS run(s) (\`bash bench/hpcc.sh\`, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    echo
    echo "| HPL variant (BCAST) | gridwire, one host | MPICH, one host | gridwire / MPICH (goal ≥ 1) | gridwire, 2 emulated hosts | MPICH over TCP | gridwire / MPICH (goal ≥ 1) |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    names=(1rg 1rM 2rg 2rM Lng LnM)
    for b in 0 1 2 3 4 5; do
        v="WR1${b}C2R4"
        g=$(awk -v v="$v" '$1=="gw" && $2==v {print $3}' "$OUT/runs.txt" | median)
        g2=$(awk -v v="$v" '$1=="gw-2hosts" && $2==v {print $3}' "$OUT/runs.txt" | median)
        m=$(awk -v v="$v" '$1=="mpich" && $2==v {print $3}' "$OUT/runs.txt" | median)
        m2=$(awk -v v="$v" '$1=="mpich-tcp" && $2==v {print $3}' "$OUT/runs.txt" | median)
        echo "| $v (${names[$b]}) | $g | $m | $(ratio "$g" "$m") | $g2 | $m2 | $(ratio "$g2" "$m2") |"
    done
    echo
    echo "HPCC checks per run (PASSED / FAILED lines of hpccoutf.txt):"
    echo
    sed 's/^/    /' "$OUT/checks.txt"
} | tee "$OUT/hpcc.md"
