# Sourced by the job tests: expect_error TEXT COMMAND... runs the command, prints what it said,
# and succeeds only when it failed (non-zero exit) saying TEXT.
expect_error() {
  local expected="$1"; shift
  local out status=0
  out=$("$@" 2>&1) || status=$?
  echo "$out"
  [ $status -ne 0 ] && grep -qF -- "$expected" <<<"$out"
}
