# Shared helpers of the CLI scenario scripts (tests/cli_*_test.sh): source it, call expect /
# one_line_error, end with `finish NAME`. ORRERY is the binary; $tmp a scratch folder removed on exit.
set -u
bin="${ORRERY:?set ORRERY to the orrery binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0

# expect NAME WANT_RC GREP_PATTERN -- ARGS...: runs orrery ARGS, checks the exit code and that the
# combined output matches the extended regex GREP_PATTERN (empty: no check).
expect() {
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc
  out=$("$bin" "$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want; output: $(echo "$out" | head -5)"; fail=$((fail+1)); return
  fi
  if [ -n "$pattern" ] && ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output does not match /$pattern/: $(echo "$out" | head -5)"; fail=$((fail+1)); return
  fi
  pass=$((pass+1))
}

# stderr must be exactly one line for bad input.
one_line_error() {
  local name=$1; shift
  local lines
  lines=$("$bin" "$@" 2>&1 >/dev/null | wc -l)
  if [ "$lines" -ne 1 ]; then echo "FAIL $name: $lines lines on stderr, expected 1"; fail=$((fail+1)); else pass=$((pass+1)); fi
}

# finish AREA: prints the tally and fails when any check failed.
finish() {
  echo "$1: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
