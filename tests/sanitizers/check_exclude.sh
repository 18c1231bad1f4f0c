#!/usr/bin/env bash
# Checks the sanitizer runs' exclusion lists (address.exclude, thread.exclude beside this file):
# every entry is one anchored ctest name pattern (^...$) with its reason, a comment block above it
# (entries that share a reason may follow each other under one block). Exit 1 with one line per
# entry that breaks the rule.
set -u
dir="$(cd "$(dirname "$0")" && pwd)"
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
    fi
  done <"$f"
done
exit "$bad"
