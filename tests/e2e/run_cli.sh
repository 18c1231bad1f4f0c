#!/usr/bin/env bash
# Runs a command and checks its exit status, stdout and stderr (used by the CLI tests in ctest).
# usage: run_cli.sh [--rc N] [--out REGEX]... [--err REGEX]... [--err-lines N] -- COMMAND ARGS...
#   --rc N         expected exit status (default 0)
#   --out REGEX    stdout must match this extended regex (repeatable)
#   --err REGEX    stderr must match this extended regex (repeatable)
#   --err-lines N  stderr must have exactly N lines
set -u
rc_want=0
err_lines=""
outs=()
errs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rc) rc_want="$2"; shift 2 ;;
    --out) outs+=("$2"); shift 2 ;;
    --err) errs+=("$2"); shift 2 ;;
    --err-lines) err_lines="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "run_cli.sh: unknown option $1" >&2; exit 99 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
fail=0
show() {
  echo "--- command: $*"
  echo "--- exit status: $rc"
  echo "--- stdout:"; head -c 4000 "$tmp/out"
  echo "--- stderr:"; cat "$tmp/err"
}
if [[ "$rc" != "$rc_want" ]]; then echo "FAIL: exit status $rc, expected $rc_want"; fail=1; fi
for re in "${outs[@]+"${outs[@]}"}"; do
  if ! grep -Eq -- "$re" "$tmp/out"; then echo "FAIL: stdout does not match: $re"; fail=1; fi
done
for re in "${errs[@]+"${errs[@]}"}"; do
  if ! grep -Eq -- "$re" "$tmp/err"; then echo "FAIL: stderr does not match: $re"; fail=1; fi
done
if [[ -n "$err_lines" ]]; then
  n=$(wc -l <"$tmp/err")
  if [[ "$n" != "$err_lines" ]]; then echo "FAIL: stderr has $n lines, expected $err_lines"; fail=1; fi
fi
if [[ $fail != 0 ]]; then show "$@"; exit 1; fi
echo "ok: $*"
