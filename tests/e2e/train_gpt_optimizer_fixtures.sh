#!/usr/bin/env bash
# Checkpoints written by earlier trees still load: each optimizer's from before optimizers became
# objects (tests/fixtures/optimizer_checkpoints: step 2 of a 4-step run on 2 ranks, bf16, ZeRO-1
# or, for the 1-bit ones, stage 0 past freeze_step; format 2), and format 3's (tests/fixtures/
# format_checkpoints: tensor parallel 2). For each folder of FIXTURES: train_gpt resumes it on 2
# ranks, its steps 3 and 4 have the old run's losses and gradient norms, and its step-4
# checkpoint has the old one's datasets, slices, data checksums and file layout (the same names,
# the same bytes). A FIXTURES folder without any fixture fails.
# usage: train_gpt_optimizer_fixtures.sh STRATA TRAIN_GPT MPIEXEC FIXTURES
set -u
here=$(dirname "$0")
. "$here/tiny_job.sh"
tiny_job optimizer_fixtures "$1"
train_gpt="$2" mpiexec="$3" fixtures="$4"

count=0
for dir in "$fixtures"/*/; do
  [[ -f "$dir/config.json" ]] || continue
  count=$((count + 1))
  name=$(basename "$dir")
  mkdir -p "$work/$name/ck/step_00000002"
  for f in "$dir"/step_00000002/*.gz; do
    gunzip -c "$f" >"$work/$name/ck/step_00000002/$(basename "$f" .gz)" || die "$name: cannot unpack $f"
  done
  sed "s#@DATA@#$work#g" "$dir/config.json" >"$work/$name/config.json"
  "$mpiexec" --oversubscribe --bind-to none -np 2 "$train_gpt" --config "$work/$name/config.json" \
    --checkpoint-dir "$work/$name/ck" --resume "$work/$name/ck/step_00000002" --threads 1 \
    --metrics "$work/$name/m.jsonl" >"$work/$name/log" 2>&1 || die "$name: train_gpt failed"
  python3 - "$dir/expected.json.gz" "$work/$name" <<'PY' || die "$name: differs from the run before the change"
import gzip, json, sys
want = json.load(gzip.open(sys.argv[1]))
run = sys.argv[2]
got = {str(r["step"]): r for r in map(json.loads, open(run + "/m.jsonl"))}
bad = []
for step, loss in want["losses"].items():
    if got.get(step, {}).get("loss") != loss:
        bad.append(f"step {step} loss {got.get(step, {}).get('loss')} (before: {loss})")
    if got.get(step, {}).get("grad_norm") != want["grad_norms"][step]:
        bad.append(f"step {step} grad norm {got.get(step, {}).get('grad_norm')} (before: {want['grad_norms'][step]})")
m = json.load(open(run + "/ck/step_00000004/manifest.json"))
def files(fs):  # the checksum of HDF5's own bytes covers object times: left out
    return [{**f, "hdf5_bytes": {**f["hdf5_bytes"], "checksum": None}} for f in fs]
for key in ("state", "params"):
    if m[key] != want["step_00000004"][key]:
        bad.append(f"step 4 checkpoint: '{key}' differs")
if files(m["files"]) != files(want["step_00000004"]["files"]):
    bad.append("step 4 checkpoint: the files' layout differs")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  echo "$name: steps 3-4 and the step-4 checkpoint as before"
done
((count > 0)) || die "no fixture (a folder with config.json) in $fixtures"
echo "PASS ($count fixtures)"
