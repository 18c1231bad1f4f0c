#!/usr/bin/env bash
# `strata data prepare --tokenizer gpt2` on the fixture text (tests/fixtures/bpe_tiny): the token
# file holds exactly the reference tokenizer's ids (ids.txt, made by tools/pytorch/make_bpe_fixture.py).
# usage: data_prepare_bpe.sh STRATA FIXTURE_DIR
set -u
strata="$1" fx="$2"
work=$(mktemp -d /tmp/strata_e2e_bpe_XXXXXX)
trap 'rm -rf "$work"' EXIT
"$strata" data prepare --input "$fx/text.txt" --tokenizer gpt2 --vocab "$fx/vocab.json" \
  --merges "$fx/merges.txt" --val-fraction 0 --output "$work/t" >"$work/out" ||
  { cat "$work/out"; echo "FAIL: prepare failed" >&2; exit 1; }
grep -q "vocabulary 512, 2 bytes per token" "$work/out" || { cat "$work/out"; echo "FAIL: vocabulary" >&2; exit 1; }
python3 - "$work/t.train.tok" "$fx/ids.txt" <<'PY' || exit 1
import struct, sys
b = open(sys.argv[1], "rb").read()
n, = struct.unpack_from("<Q", b, 16)
ids = list(struct.unpack_from(f"<{n}H", b, 64))
ref = [int(x) for x in open(sys.argv[2])]
if ids != ref:
    first = next((i for i, (a, c) in enumerate(zip(ids, ref)) if a != c), min(len(ids), len(ref)))
    sys.exit(f"FAIL: {len(ids)} ids, reference {len(ref)}; first difference at {first}")
print(f"{n} ids equal the reference tokenizer's")
PY
