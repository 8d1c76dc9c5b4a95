# Sourced by tests/mpi/mpi4py.sh (source build) and
# compat/mpich-abi/test-mpi4py-wheel.sh (PyPI wheel): runs mpi4py's own test
# modules with 2 ranks under gwrun, one line per module.
#
#   run_mpi4py_modules PREFIX
# Reads: must_pass ("all" = every module, report only; `module~pat~pat`
# leaves out the module's tests whose names contain a pattern), src (the
# unpacked sdist), gwrun, py. Sets: passed, total, report; sets fail=1 when a
# listed module fails (unless reporting only). A module that ran no test
# (unittest's "Ran 0 tests ... OK" exits 0, e.g. when every test was left out
# or skipped by a missing feature) fails: it checked nothing.
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
        # 400 s: test_util_dtlib's ~37 000 subtests (Python-bound, ~1 ms
        # each) take 40 s on a quiet machine and 140 s on a busy 2-core one.
        out=$(cd "$src" && timeout 420 "$gwrun" --timeout 400 -n 2 "$py" test/main.py --no-builddir -q "${excl[@]}" "$mod" 2>&1)
        rc=$?
        secs=$(( $(date +%s) - tt ))
        local ran
        ran=$(echo "$out" | grep -E '^Ran [0-9]+ tests? ' || true)
        if [ $rc -eq 0 ] && [ -n "$ran" ] && ! echo "$ran" | grep -q '^Ran 0 tests'; then
            passed=$((passed + 1))
            echo "ok   $prefix$t: $(echo "$ran" | head -1) (${secs} s)"
        else
            if [ $rc -eq 0 ]; then
                echo "FAIL $prefix$t: ran no test (${ran:-no 'Ran N tests' line}) (${secs} s)"
            else
                echo "FAIL $prefix$t (${secs} s)"
            fi
            [ $report = 1 ] || { echo "$out" | tail -15; fail=1; }
        fi
    done
}
