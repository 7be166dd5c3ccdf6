# Sourced by the job and tool tests. expect_error TEXT COMMAND... runs the command, prints what
# it said, and succeeds only when it failed (non-zero exit) saying TEXT.
expect_error() {
  local expected="$1"; shift
  local out status=0
  out=$("$@" 2>&1) || status=$?
  echo "$out"
  [ $status -ne 0 ] && grep -qF -- "$expected" <<<"$out"
}

# same_variables A B: two tasks' --variables-out files hold the same variables, byte for byte
# (the header names the task, and the checksum covers it).
same_variables() {
  cmp <(sed -n 2p "$1" | sed 's/"model":"[^"]*"//') <(sed -n 2p "$2" | sed 's/"model":"[^"]*"//') &&
    cmp <(tail -n +3 "$1" | head -c -8) <(tail -n +3 "$2" | head -c -8)
}
