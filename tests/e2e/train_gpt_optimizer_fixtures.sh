#!/usr/bin/env bash
# Checkpoints written by earlier trees still load: each optimizer's from before optimizers became
# objects (tests/fixtures/optimizer_checkpoints: step 2 of a 4-step run on 2 ranks, bf16, ZeRO-1
# or, for the 1-bit ones, stage 0 past freeze_step; format 2), and format 3's (tests/fixtures/
# format_checkpoints: tensor parallel 2). For each folder of FIXTURES: train_gpt resumes it on 2
# ranks, its steps 3 and 4 have the old run's losses and gradient norms, and its step-4
# checkpoint has the old one's datasets, slices, data checksums and file layout (the same names,
# the same bytes). A FIXTURES folder without any fixture fails.
# The optimizer fixtures were made on an AVX-512 machine, and the CPU's row kernels (the
# cross-entropy's and attention's sums of exponentials) add in the order of the vector width:
# on a machine whose row kernels are not AVX-512's (the CPU lacks avx512f/avx512dq, or
# STRATA_CPU_ISA names another), their losses and gradient norms agree to 1e-7 relative instead of
# bitwise (measured on an AVX2 EPYC: 2.7e-9, the gradient norms there the same bits), and the
# step-4 checkpoint is compared without its data checksums (the 1-bit optimizers' compression turns
# those last bits into other weights: OneBitAdam's differed there; the others' did not).
# usage: train_gpt_optimizer_fixtures.sh STRATA TRAIN_GPT MPIEXEC FIXTURES
set -u
here=$(dirname "$0")
. "$here/tiny_job.sh"
tiny_job optimizer_fixtures "$1"
train_gpt="$2" mpiexec="$3" fixtures="$4"
# The row kernels train_gpt runs here: framework/backend/cpu/isa.cpp's choice.
isa="${STRATA_CPU_ISA:-}"
if [[ -z "$isa" ]]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512dq "* ]]; then isa=avx512; else isa=other; fi
fi

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
  python3 - "$dir/expected.json.gz" "$work/$name" "$isa" <<'PY' || die "$name: differs from the run before the change"
import gzip, json, sys
want = json.load(gzip.open(sys.argv[1]))
run = sys.argv[2]
exact = sys.argv[3] == "avx512"  # the fixtures' row kernels (see above)
got = {str(r["step"]): r for r in map(json.loads, open(run + "/m.jsonl"))}
bad = []
def same(a, b):
    if exact or a is None or b is None:
        return a == b
    return abs(a - b) <= 1e-7 * abs(b)
for step, loss in want["losses"].items():
    if not same(got.get(step, {}).get("loss"), loss):
        bad.append(f"step {step} loss {got.get(step, {}).get('loss')} (before: {loss})")
    if not same(got.get(step, {}).get("grad_norm"), want["grad_norms"][step]):
        bad.append(f"step {step} grad norm {got.get(step, {}).get('grad_norm')} (before: {want['grad_norms'][step]})")
m = json.load(open(run + "/ck/step_00000004/manifest.json"))
def files(fs):  # the checksum of HDF5's own bytes covers object times: left out
    return [{**f, "hdf5_bytes": {**f["hdf5_bytes"], "checksum": None}} for f in fs]
def params(ps):  # without the data checksums where the row kernels are not the fixtures'
    if exact:
        return ps
    return [{**p, "slices": [{**s, "checksum": None} for s in p["slices"]]} for p in ps]
if m["state"] != want["step_00000004"]["state"]:
    bad.append("step 4 checkpoint: 'state' differs")
if params(m["params"]) != params(want["step_00000004"]["params"]):
    bad.append("step 4 checkpoint: 'params' differs")
if files(m["files"]) != files(want["step_00000004"]["files"]):
    bad.append("step 4 checkpoint: the files' layout differs")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  if [[ "$isa" == avx512 ]]; then
    echo "$name: steps 3-4 and the step-4 checkpoint as before"
  else
    echo "$name: steps 3-4 as before to 1e-7, the step-4 checkpoint's layout as before (row kernels not AVX-512's)"
  fi
done
((count > 0)) || die "no fixture (a folder with config.json) in $fixtures"
echo "PASS ($count fixtures)"
