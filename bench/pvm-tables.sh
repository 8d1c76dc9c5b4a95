# The two Markdown tables of the PVM benchmarks (timing.c, bwtest.c), shared
# by bench/pvm.sh (one host) and bench/pvm-2hosts.sh (two testbed hosts).
# Sourced; the caller defines rtt, tsize, bw and bwt (medians it measured,
# by side `gw`/`deb`) before calling pvm_tables.

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a/b; else print "-" }'; }

pvm_tables() {
  local g d s
  echo "timing.c (PvmDataRaw, PvmRouteDirect): round trip in µs, pack time in µs"
  echo
  echo "| message | gridwire round trip | PVM round trip | ratio (gw/PVM) | gridwire pack | PVM pack |"
  echo "|---|---|---|---|---|---|"
  g=$(rtt gw); d=$(rtt deb)
  echo "| 4 B (minimal) | $g | $d | $(ratio "$g" "$d") | | |"
  for s in 100 1000 10000 100000 1000000 4000000; do
    g=$(tsize gw $s 2); d=$(tsize deb $s 2)
    echo "| $s B | $g | $d | $(ratio "$g" "$d") | $(tsize gw $s 1) | $(tsize deb $s 1) |"
  done
  echo
  echo "bwtest.c (pvm_pkdouble, PvmDataInPlace): round trip in µs and bandwidth in MB/s"
  echo
  echo "| message | gridwire µs | PVM µs | gridwire MB/s | PVM MB/s | bandwidth ratio (gw/PVM) |"
  echo "|---|---|---|---|---|---|"
  for s in 8 80 800 8000 80000 800000; do
    g=$(bw gw $s); d=$(bw deb $s)
    echo "| $s B | $(bwt gw $s) | $(bwt deb $s) | $g | $d | $(ratio "$g" "$d") |"
  done
}
