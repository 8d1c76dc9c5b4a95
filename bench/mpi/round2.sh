# Sourced by bench/mpi.sh after the round-1 targets: the targets of issue 18
# ("Performance, round 2"), each as gridwire's ratio to the BETTER of MPICH
# and Open MPI in the same run (the lesser time, the greater bandwidth or
# rate), worst over the sizes a target names, one verdict line per target;
# then the MPI_THREAD_MULTIPLE figure (reported, not a target).
# Uses get/ratio/human/met/pinned_ratio/floor_of and $med, $RUNS from mpi.sh.

# the better peer figure: "low" = lesser is better (times), "high" = greater
better_peer() { # how method key size
  local m o
  m=$(get "mpich-$2" "$3" "$4"); o=$(get "ompi-$2" "$3" "$4")
  printf '%s\n%s\n' "$m" "$o" | grep -v '^$' | sort -g | { if [ "$1" = low ]; then head -1; else tail -1; fi; }
}
# worst ratio over SIZES and the size it was at: "ratio size" (empty: no data)
worst_vs_peers() { # how method key sizes...
  local how=$1 m=$2 k=$3; shift 3
  for s in "$@"; do
    r=$(ratio "$(get "gw-$m" "$k" "$s")" "$(better_peer "$how" "$m" "$k" "$s")")
    [ "$r" != n/a ] && echo "$r $s"
  done | sort -g | { if [ "$how" = low ]; then tail -1; else head -1; fi; }
}
# one verdict row: label how method key goal-op goal sizes...
r2row() {
  local label=$1 how=$2 m=$3 k=$4 op=$5 goal=$6; shift 6
  local w b wr ws br bs
  w=$(COL=4 worst_vs_peers "$how" "$m" "$k" "$@")
  # best of the runs on each side: least time (column 5), greatest rate (6)
  if [ "$how" = low ]; then b=$(COL=5 worst_vs_peers "$how" "$m" "$k" "$@"); else b=$(COL=6 worst_vs_peers "$how" "$m" "$k" "$@"); fi
  read -r wr ws <<<"$w"; read -r br bs <<<"$b"
  local shown=≥; [ "$op" = "<=" ] && shown=≤
  echo "| $label | ${wr:-n/a} | ${ws:+$(human "$ws")} | $shown $goal | $(met "$wr" "$op" "$goal") | ${br:-n/a} | $(met "$br" "$op" "$goal") |"
}

echo "#### Targets, round 2 (issue 18)"
echo
echo "Each ratio is gridwire / the better of MPICH and Open MPI in this run at each size (below 1 is better for times, above 1 for rates and bandwidths), the worst over the sizes named; \"at\" is the size of the worst ratio."
echo
echo "| target | gridwire / better peer (medians, worst size) | at | goal | | best of $RUNS runs each | |"
echo "| --- | ---: | ---: | --- | --- | ---: | --- |"
r2row "message rate 1/8/64 B, window 64, shm" high shm rate ">=" 1.2 $RATE
r2row "message rate 1/8/64 B, window 64, tcp" high tcp rate ">=" 1.2 $RATE
r2row "latency shm 0 B–1 KiB" low shm lat "<=" 0.9 0 1 8 64 512 1024
r2row "latency shm 4–64 KiB, osu's untouched buffer" low shm lat "<=" 0.9 $TOUCH
r2row "latency shm 4–64 KiB, sender writes its buffer before each send" low shm lat_touch "<=" 0.9 $TOUCH
r2row "bandwidth shm 64 KiB–4 MiB" high shm bw ">=" 1.1 65536 262144 1048576 4194304
r2row "bidirectional bandwidth shm 64 KiB–4 MiB" high shm bibw ">=" 1.1 65536 262144 1048576 4194304
r2row "bandwidth tcp 1–4 MiB" high tcp bw ">=" 1.1 1048576 4194304
r2row "bidirectional bandwidth tcp 1–4 MiB" high tcp bibw ">=" 1.1 1048576 4194304
for c in bcast allreduce reduce allgather alltoall; do
  r2row "$c, 2 ranks, shm, 8 B–1 MiB" low shm "$c" "<=" 0.9 $COLL
done
r2row "barrier, 2 ranks, shm" low shm barrier "<=" 0.9 0
for c in bcast allreduce reduce allgather alltoall; do
  r2row "$c, 2 ranks, tcp, 8 B–1 MiB" low tcp "$c" "<=" 0.9 $COLL
done
r2row "barrier, 2 ranks, tcp" low tcp barrier "<=" 0.9 0
# tcp 8 B against the raw busy-polling floor: pinned alike (worse of the two
# placements), as the round-1 row; unpinned against raw-spin beside it
tcp8=$(COL=4 pinned_ratio 8); tcp8best=$(COL=5 pinned_ratio 8)
[ "$tcp8" = n/a ] && tcp8=$(ratio "$(get gw-tcp lat 8)" "$(get raw-spin lat 8)")
[ "$tcp8best" = n/a ] && tcp8best=$(COL=5 ratio "$(get gw-tcp lat 8)" "$(get raw-spin lat 8)")
[ "$tcp8" = n/a ] && tcp8=""
[ "$tcp8best" = n/a ] && tcp8best=""
echo "| tcp 8 B latency / raw busy-polling TCP floor, pinned alike (worse placement) | ${tcp8:-n/a} | 8 B | ≤ 1.05 | $(met "$tcp8" "<=" 1.05) | ${tcp8best:-n/a} | $(met "$tcp8best" "<=" 1.05) |"
echo "| the same unpinned: gridwire tcp / raw busy-polling (not like for like) | $(ratio "$(get gw-tcp lat 8)" "$(get raw-spin lat 8)") | 8 B | | | $(COL=5 ratio "$(COL=5 get gw-tcp lat 8)" "$(COL=5 get raw-spin lat 8)") | |"
tm_gw=$(get gw-tm tm 8); tm_m=$(get mpich-tm tm 8); tm_o=$(get ompi-tm tm 8)
skipped() { # config: why a THREAD_MULTIPLE figure is missing
  local why; why=$(grep -h 'thread_multiple:' "$W/$1.err" 2>/dev/null | head -1 | sed 's/^thread_multiple: //')
  echo "${why:-no figure (see $W/$1.err)}"
}
echo "| MPI_THREAD_MULTIPLE, 2 ranks × 2 threads, 8 B ping-pong per thread on its own communicator: gridwire / MPICH (reported, not a target) | $(ratio "$tm_gw" "$tm_m") | 8 B | reported | | | |"
echo
echo "MPI_THREAD_MULTIPLE (\`bench/mpi/thread_multiple.c\`, one host, 4 busy threads on $(nproc) cores; aggregate thousands of round trips per second, median of $RUNS): gridwire ${tm_gw:-$(skipped gw-tm)}, MPICH ${tm_m:-$(skipped mpich-tm)}, Open MPI ${tm_o:-$(skipped ompi-tm)}."
echo
