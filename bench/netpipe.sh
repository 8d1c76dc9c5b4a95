#!/usr/bin/env bash
# NetPIPE's MPI driver (NPmpi) on gridwire: fetches Debian's `netpipe` source
# package (`apt-get source`), builds NPmpi with scripts/gwcc, and runs it under
# `gwrun -n 2` (one host, shm) and `gwrun -n 2 --emulate-hosts 2` (tcp) to
# completion. Not a test (it fetches sources); prints a Markdown summary
# (headline latency and peak bandwidth) for docs/benchmarks.md.
#
#   bench/netpipe.sh                 (also: NETPIPE=1 bench/mpi.sh)
# Env: CARGO_TARGET_DIR (default target), NETPIPE_UPPER (largest message,
#      bytes, default 4194304), NETPIPE_REPEAT (round trips per trial and
#      size, default 200; empty: NetPIPE's own choice, which aims at 0.25 s a
#      size but is misled by one fast trial on a loaded machine). With -p 0
#      (no perturbed sizes beside each size) each of the two runs takes
#      seconds on a quiet machine.
#
# apt-get source needs deb-src entries. When there are none and we are root,
# this script adds them once, as a copy of the system's Debian `deb` entries
# with the type changed (/etc/apt/sources.list.d/gridwire-deb-src.sources or
# .list), then runs apt-get update; not root: it skips with a message.
# Exit status: 0 when NPmpi ran to completion on both (or skipped with a
# reason that is not gridwire's: no network, not root), 1 when it failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$root/$T ;; esac
W=$T/netpipe
UPPER=${NETPIPE_UPPER:-4194304}
REPEAT=${NETPIPE_REPEAT-200}
npargs=(-p 0 -u "$UPPER"); [ -n "$REPEAT" ] && npargs+=(-n "$REPEAT")
mkdir -p "$W"
skip() { echo "bench/netpipe.sh: skipped: $*" >&2; echo "NetPIPE: skipped ($*)."; exit 0; }

# 1. The source package.
srcdir() { ls -d "$W"/netpipe-*/ "$W"/NetPIPE-*/ 2>/dev/null | head -1; }
src=$(srcdir)
if [ -z "$src" ]; then
  rm -f "$W/source.note"
  if ! apt-cache showsrc netpipe 2>/dev/null | grep '^Package: netpipe' >/dev/null; then
    [ "$(id -u)" -eq 0 ] || skip "no deb-src entries for apt and not root to add them"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      # deb822: every stanza signed by the Debian archive key, as deb-src.
      awk 'BEGIN { RS = ""; ORS = "\n\n" }
           /Signed-By:[^\n]*debian-archive-keyring/ && /(^|\n)Types:[^\n]*deb/ {
             sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' \
        /etc/apt/sources.list.d/debian.sources >/etc/apt/sources.list.d/gridwire-deb-src.sources
      [ -s /etc/apt/sources.list.d/gridwire-deb-src.sources ] || rm -f /etc/apt/sources.list.d/gridwire-deb-src.sources
    fi
    if [ ! -f /etc/apt/sources.list.d/gridwire-deb-src.sources ] && [ -f /etc/apt/sources.list ]; then
      # one-line format: "deb URI SUITE COMPONENTS" -> "deb-src ..." for the Debian archive
      sed -n 's/^deb \(.*\/debian.*\)$/deb-src \1/p' /etc/apt/sources.list >/etc/apt/sources.list.d/gridwire-deb-src.list
      [ -s /etc/apt/sources.list.d/gridwire-deb-src.list ] || rm -f /etc/apt/sources.list.d/gridwire-deb-src.list
    fi
    echo "bench/netpipe.sh: added deb-src entries; apt-get update" >&2
    apt-get update -qq >"$W/apt-update.log" 2>&1 || skip "apt-get update failed (see $W/apt-update.log)"
    apt-cache showsrc netpipe 2>/dev/null | grep '^Package: netpipe' >/dev/null || skip "apt knows no source package netpipe"
  fi
  command -v dpkg-source >/dev/null || {
    [ "$(id -u)" -eq 0 ] || skip "dpkg-dev (dpkg-source) is missing and not root"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >"$W/apt-install.log" 2>&1 || skip "cannot install dpkg-dev"
  }
  if ! (cd "$W" && timeout 300 apt-get source netpipe >"$W/apt-source.log" 2>&1); then
    # The Debian packaging tarball (debian.tar.xz) may be missing from a
    # mirror while the upstream one (orig.tar.gz) came: build that, and say so.
    orig=$(ls "$W"/netpipe_*.orig.tar.* 2>/dev/null | head -1)
    [ -n "$orig" ] || skip "apt-get source netpipe failed (see $W/apt-source.log)"
    tar -C "$W" -xf "$orig" || skip "cannot unpack $orig"
    echo "upstream source $(basename "$orig") from apt-get source; the Debian packaging part could not be fetched, so Debian's patches are not applied" >"$W/source.note"
  fi
  src=$(srcdir)
  [ -n "$src" ] || skip "apt-get source left no netpipe-*/ directory"
fi
src=${src%/}
version=$(basename "$src")
note=""
[ -f "$W/source.note" ] && note=" Source: $(cat "$W/source.note")."

# 2. gridwire's libmpi and gwrun, then NPmpi built with gwcc (NetPIPE's own makefile target).
CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || { echo "NetPIPE: gridwire build failed."; exit 1; }
export GW_MPI_LIBDIR=$T/release
rm -f "$src/NPmpi"
if ! make -C "$src" mpi MPICC="$root/scripts/gwcc" CC="$root/scripts/gwcc" >"$W/build.log" 2>&1 || [ ! -x "$src/NPmpi" ]; then
  echo "bench/netpipe.sh: building NPmpi with gwcc failed:" >&2; tail -20 "$W/build.log" >&2
  echo "NetPIPE ($version): NPmpi did **not** build with gwcc (see $W/build.log)."
  exit 1
fi
ldd "$src/NPmpi" | grep -q "$GW_MPI_LIBDIR/libmpi.so" || { echo "NetPIPE: NPmpi is not linked to gridwire's libmpi.so" >&2; exit 1; }

# 3. Run it: one host (shm) and two emulated hosts (tcp).
status=0
summary() { # label outfile seconds
  # NPmpi's output file: "bytes  Mbps  seconds(one-way)" per size; the
  # headline latency is that of the smallest size (1 B), Mbps = 10^6 bit/s.
  awk -v label="$1" -v secs="$3" -v ver="$version" '
    NF >= 3 { n++; if (n == 1) { lat = $3; latb = $1 } if ($2 > bw) { bw = $2; bwb = $1 } last = $1 }
    END {
      if (!n) { printf "| %s | no output | | | |\n", label; exit }
      printf "| %s | %d | %.2f µs (%d B) | %.0f Mbit/s = %.0f MB/s (%d B) | %d B, %s s |\n", label, n, lat * 1e6, latb, bw, bw / 8, bwb, last, secs }' "$2"
}
rows=""
for mode in shm tcp; do
  out=$W/np-$mode.out
  rm -f "$out"
  hosts=(); [ $mode = tcp ] && hosts=(--emulate-hosts 2)
  t0=$(date +%s.%N)
  (cd "$W" && timeout 330 "$T/release/gwrun" -n 2 "${hosts[@]}" --timeout 300 "$src/NPmpi" "${npargs[@]}" -o "$out" >"$W/np-$mode.log" 2>&1)
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  if [ $rc -ne 0 ] || [ ! -s "$out" ]; then
    echo "bench/netpipe.sh: NPmpi ($mode) failed, exit $rc:" >&2; tail -20 "$W/np-$mode.log" >&2
    rows="$rows| $mode | **failed** (exit $rc) | | | |"$'\n'
    status=1
  else
    rows="$rows$(summary "$mode" "$out" "$secs")"$'\n'
  fi
done

echo "NetPIPE ($version, from Debian's source package \`netpipe\`), NPmpi built with \`scripts/gwcc\`, run as \`gwrun -n 2 [--emulate-hosts 2] NPmpi ${npargs[*]}\` ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)).$note"
echo
echo "| gridwire method | sizes measured | one-way latency, smallest size | peak bandwidth | largest size, run time |"
echo "| --- | ---: | ---: | ---: | --- |"
printf '%s' "$rows"
echo
exit $status
