#!/usr/bin/env bash
# Checks the sanitizer runs' exclusion lists (address.exclude, thread.exclude beside this file):
# every entry is one anchored ctest name pattern (^...$) with its reason, a comment block above it
# (entries that share a reason may follow each other under one block). With a build folder
# (check_exclude.sh BUILD_DIR, as ctest runs it), every pattern must also match the name of at
# least one of that build's ctest tests, as ctest -N lists them (a parameterized gtest's name ends
# in ` # GetParam() = ...`). Exit 1 with one line per entry that breaks a rule.
set -u
dir="$(cd "$(dirname "$0")" && pwd)"
build="${1:-}"
names=""
if [[ -n "$build" ]]; then
  names=$(ctest -N --test-dir "$build" | sed -n 's/^ *Test *#[0-9]*: //p')
  if [[ -z "$names" ]]; then
    echo "check_exclude.sh: ctest -N lists no test in $build" >&2
    exit 1
  fi
fi
bad=0
for f in "$dir"/address.exclude "$dir"/thread.exclude; do
  reason=0
  n=0
  while IFS= read -r line || [[ -n "$line" ]]; do
    n=$((n + 1))
    if [[ "$line" =~ ^[[:space:]]*# ]]; then
      reason=1
    elif [[ "$line" =~ ^[[:space:]]*$ ]]; then
      reason=0
    elif [[ ! "$line" =~ ^\^[^[:space:]]+\$$ ]]; then
      echo "$(basename "$f"):$n: '$line' is not one anchored ctest name pattern (^name$): write one a line" >&2
      bad=1
    elif ((reason == 0)); then
      echo "$(basename "$f"):$n: '$line' has no reason: put a comment saying why just above it" >&2
      bad=1
    elif [[ -n "$names" ]] && ! grep -qE -- "$line" <<<"$names"; then
      echo "$(basename "$f"):$n: '$line' matches no ctest test of $build (ctest -N): it excludes nothing" >&2
      bad=1
    fi
  done <"$f"
done
exit "$bad"
