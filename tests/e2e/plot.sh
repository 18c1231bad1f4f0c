#!/usr/bin/env bash
# strata plot on the committed two-rank metrics (tests/fixtures/metrics, from a train_gpt run with
# --metrics 'm.{rank}.jsonl'): a valid PNG of the requested size and a valid SVG, both of a
# plausible size (a picture with the four panels' lines, not an empty frame).
# usage: plot.sh STRATA METRICS_DIR
set -u
strata="$1" fx="$2"
work=$(mktemp -d /tmp/strata_e2e_plot_XXXXXX)
trap 'rm -rf "$work"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

"$strata" plot "$fx/m.0.jsonl" "$fx/m.1.jsonl" -o "$work/run.png" --width 1000 --height 700 >"$work/out" ||
  die "plot to PNG failed: $(cat "$work/out")"
grep -q "2 ranks, 24 steps, 14 memory series" "$work/out" || die "unexpected summary: $(cat "$work/out")"
python3 - "$work/run.png" <<'PY' || exit 1
import os, struct, sys
b = open(sys.argv[1], "rb").read()
if b[:8] != b"\x89PNG\r\n\x1a\n" or b[12:16] != b"IHDR":
    sys.exit("FAIL: not a PNG")
w, h = struct.unpack(">II", b[16:24])
if (w, h) != (1000, 700):
    sys.exit(f"FAIL: PNG is {w}x{h}, asked for 1000x700")
if not 30_000 < len(b) < 2_000_000:
    sys.exit(f"FAIL: PNG of {len(b)} bytes is implausible for four panels of lines")
if b[-8:-4] != b"IEND":
    sys.exit("FAIL: PNG does not end with IEND")
PY
[[ ! -e $work/run.png.tmp ]] || die "temporary output left behind"

"$strata" plot "$fx/m.0.jsonl" -o "$work/run.svg" >"$work/out" || die "plot to SVG failed: $(cat "$work/out")"
head -c 100 "$work/run.svg" | grep -q "^<?xml" || die "SVG does not start with <?xml"
grep -q "<svg" "$work/run.svg" && tail -c 100 "$work/run.svg" | grep -q "</svg>" || die "not a complete SVG"
size=$(stat -c %s "$work/run.svg")
((size > 20000 && size < 2000000)) || die "SVG of $size bytes is implausible"
for t in loss "learning rate" throughput "memory: peak per step" validation "device params"; do
  grep -q "$t" "$work/run.svg" || die "the SVG has no '$t'"
done
echo "plot: PNG 1000x700 and SVG with every panel"
