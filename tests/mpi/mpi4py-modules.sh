# Sourced by tests/mpi/mpi4py.sh (source build) and
# compat/mpich-abi/test-mpi4py-wheel.sh (PyPI wheel): runs mpi4py's own test
# modules with 2 ranks under gwrun, one line per module.
#
#   run_mpi4py_modules PREFIX
# Reads: must_pass ("all" = every module, report only; `module~pat~pat`
# leaves out the module's tests whose names contain a pattern), src (the
# unpacked sdist), gwrun, py. Sets: passed, total, report; sets fail=1 when a
# listed module fails (unless reporting only).
run_mpi4py_modules() {
    local prefix=$1 t tt mod out rc secs p
    if [ "$must_pass" = all ]; then
        must_pass=$(cd "$src/test" && ls test_*.py | sed 's/\.py$//')
        report=1
    else
        report=0
    fi
    passed=0
    total=0
    for t in $must_pass; do
        total=$((total + 1))
        tt=$(date +%s)
        mod=${t%%~*}
        local excl=()
        if [ "$mod" != "$t" ]; then
            local pats
            IFS='~' read -r -a pats <<<"${t#*~}"
            for p in "${pats[@]}"; do excl+=(-x "$p"); done
        fi
        out=$(cd "$src" && timeout 200 "$gwrun" --timeout 180 -n 2 "$py" test/main.py --no-builddir -q "${excl[@]}" "$mod" 2>&1)
        rc=$?
        secs=$(( $(date +%s) - tt ))
        if [ $rc -eq 0 ]; then
            passed=$((passed + 1))
            echo "ok   $prefix$t: $(echo "$out" | grep -E '^Ran' | head -1) (${secs} s)"
        else
            echo "FAIL $prefix$t (${secs} s)"
            [ $report = 1 ] || { echo "$out" | tail -15; fail=1; }
        fi
    done
}
