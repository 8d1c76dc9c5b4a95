# Sourced by the project's shell test scripts: the same skip rule as the
# Rust tests' gridwire_testkit::skip. Under CI=true a test that cannot run
# fails with the reason; elsewhere it prints "SKIPPED: reason" and the line
# is appended to $GW_SKIP_LOG (set by `make test`) so the summary counts it.
#   skip_or_fail "reason"   # then: exit $?   (1 under CI, 0 elsewhere)
skip_or_fail() {
  local who="${GW_TEST_NAME:-$(basename "${BASH_SOURCE[1]:-$0}")}"
  if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
    echo "FAILED: $who cannot run under CI=true: $*" >&2
    return 1
  fi
  echo "SKIPPED: $who: $*" >&2
  [ -n "${GW_SKIP_LOG:-}" ] && echo "SKIPPED: $who: $*" >> "$GW_SKIP_LOG"
  return 0
}
