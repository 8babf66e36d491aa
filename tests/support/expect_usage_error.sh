# shellcheck shell=sh disable=SC2034,SC2154  # program and name are set, failed and dir read, by the sourcing test
# Sourced by the shell tests of bad command lines (bench_cli_errors, nanogpt_cpu_errors). Before sourcing, set
# program (the command to run) and name (the prefix its error lines start with). Gives dir (a temporary directory,
# removed on exit), failed (0; 1 once an expectation fails) and
#   expect MESSAGE ARGS...: "$program" ARGS exits 2 with exactly one stderr line, starting "$name: " and holding
#   MESSAGE (with quiet_stdout=1 also: nothing on stdout).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
expect() {
  message=$1
  shift
  "$program" "$@" >"$dir/out" 2>"$dir/err"
  code=$?
  lines=$(wc -l <"$dir/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q "^$name: " "$dir/err" ||
     ! grep -qF -- "$message" "$dir/err" || { [ "${quiet_stdout:-0}" = 1 ] && [ -s "$dir/out" ]; }; then
    echo "FAILED: $name $* -> exit $code, stderr:"
    cat "$dir/err"
    echo "  (wanted exit 2 and one line with: $message${quiet_stdout:+, nothing on stdout})"
    failed=1
  fi
}
