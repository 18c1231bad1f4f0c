#!/usr/bin/env bash
# End-to-end fine-tuning start of train_gpt from the Hugging Face GPT-2 fixture
# (tests/fixtures/hf_gpt2_tiny): --init-from + --save-initial, the console summary and the resolved
# config in the log folder, resume-versus-init rules, weights-only loading of a checkpoint.
# usage: train_gpt_init_from.sh STRATA TRAIN_GPT FIXTURE_DIR [LAUNCHER...]
# LAUNCHER (e.g. mpirun -np 2 --oversubscribe) prefixes the train_gpt commands, which then also
# use ZeRO-3 with bf16: the step-0 weights must still be the fixture's, bit for bit.
set -u
strata="$1" train_gpt="$2" fixture="$3"
shift 3
launcher=("$@")
work=$(mktemp -d /tmp/strata_e2e_init_XXXXXX)
trap 'rm -rf "$work"' EXIT
die() {
  echo "FAIL: $*" >&2
  for f in "$work"/*/log; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done >&2
  exit 1
}

# Random tokens < 64 (the fixture's vocabulary), as a u16 array.
python3 -c "
import random, struct, sys
r = random.Random(5)
sys.stdout.buffer.write(struct.pack('<3000H', *[r.randrange(64) for _ in range(3000)]))
" >"$work/ids.bin" || die "cannot write token ids"
"$strata" data prepare --input "$work/ids.bin" --tokenized u16 --vocab-size 64 \
  --output "$work/tok" >/dev/null || die "strata data prepare failed"

zero='{"stage": 0}'
precision=''
if ((${#launcher[@]})); then
  zero='{"stage": 3}'
  precision='"bf16": {"enabled": true},'
fi
cat >"$work/config.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 2,
  "steps_per_print": 1,
  $precision
  "zero_optimization": $zero,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
  "strata": {
    "seed": 3,
    "train_steps": 2,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 16, "vocab_size": 64},
    "data": {"train": "$work/tok.train.tok"},
    "sample": {"tokens": 0}
  }
}
EOF

# The reference: the fixture imported and exported by `strata ckpt` (bitwise the fixture's
# tensors, tested in test_checkpoint), as a file to compare byte for byte.
"$strata" ckpt import "$fixture" --output "$work/imp" >/dev/null || die "import failed"
"$strata" ckpt export "$work/imp" --output "$work/ref" >/dev/null || die "export failed"

# run DIR ARGS...: train_gpt in DIR, log in DIR/log (appended), launched like strata run does.
run() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  (cd "$dir" && STRATA_PROGRESS_DIR="$dir/logs/progress" "${launcher[@]}" "$train_gpt" \
    --config "$work/config.json" --checkpoint-dir ck --threads 1 "$@" >>log 2>&1)
}
same_weights() {  # STEP_DIR: its export is byte-identical to the reference export
  rm -rf "$work/cmp"
  "$strata" ckpt export "$1" --output "$work/cmp" >/dev/null || die "export of $1 failed"
  cmp -s "$work/cmp/model.safetensors" "$work/ref/model.safetensors"
}

run "$work/a" --init-from "$fixture" --save-initial || die "--init-from run failed"
grep -q "init-from: weights of $fixture (fresh optimizer state, step 0)" "$work/a/log" ||
  die "no init-from line"
same_weights "$work/a/ck/step_00000000" || die "step-0 weights are not the fixture's"
"$strata" ckpt inspect "$work/a/ck/step_00000000" | grep -q "optimizer adamw (0 updates).*data position 0 " ||
  die "step 0 does not start with a fresh optimizer and sampler"
"$strata" ckpt inspect "$work/a/ck" | grep -q "optimizer adamw (2 updates)" ||
  die "step 2 does not have exactly 2 updates"
# The fine-tuned checkpoint exports with the source's Hugging Face config.
"$strata" ckpt export "$work/a/ck" --output "$work/a_hf" >/dev/null || die "export of the fine-tuned run failed"
grep -q '"bos_token_id": 50256' "$work/a_hf/config.json" || die "the export lost the source's config.json"
# The console before step 1 is a short summary (the device "auto" chose among it, once); the
# resolved config is in the log folder.
before=$(sed -n '/^\(\[0\] \)\?step 1\//q;p' "$work/a/log" | wc -l)
((before <= 16)) || die "$before lines before step 1 (want at most 16)"
(($(grep -c 'config note: strata.device "auto": ' "$work/a/log") == 1)) ||
  die "the device \"auto\" chose is not noted once"
grep -q "config     resolved config: $work/a/logs/resolved_config.json" "$work/a/log" ||
  die "the summary does not say where the resolved config is"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert c['strata']['model']['n_head'] == 4" \
  "$work/a/logs/resolved_config.json" || die "resolved_config.json is not the run's config"

# Restarted with the same command: its own checkpoint wins.
run "$work/a" --init-from "$fixture" --save-initial --set strata.train_steps=3 || die "restart failed"
grep -q "init-from: not used, this run resumes its own checkpoint" "$work/a/log" ||
  die "the restart did not resume its own checkpoint"
# Another source over the same checkpoint directory, or with --resume: one-line errors.
run "$work/a" --init-from "$work/imp" --set strata.train_steps=4 && die "a different --init-from was accepted"
grep -q "already holds a run started from $fixture; resume it without --init-from" "$work/a/log" ||
  die "no error for a different --init-from"
run "$work/c" --init-from "$fixture" --resume "$work/a/ck" && die "--init-from with --resume PATH was accepted"
grep -q -- "--init-from $fixture and --resume $work/a/ck both say where the weights come from" "$work/c/log" ||
  die "no error for --init-from with --resume"

# A Strata checkpoint with optimizer state as the source: weights only, fresh optimizer.
run "$work/b" --init-from "$work/a/ck" --save-initial --set strata.train_steps=1 || die "init from a checkpoint failed"
"$strata" ckpt inspect "$work/b/ck/step_00000000" | grep -q "optimizer adamw (0 updates)" ||
  die "init from a checkpoint kept its optimizer state"
rm -rf "$work/ref" && "$strata" ckpt export "$work/a/ck" --output "$work/ref" >/dev/null
same_weights "$work/b/ck/step_00000000" || die "step-0 weights differ from the source checkpoint's"
# An HDF5 export as the source (one rank: the conversion path is the same on any number).
if ((${#launcher[@]} == 0)); then
  "$strata" ckpt export "$work/a/ck" --output "$work/a.h5" >/dev/null || die "HDF5 export failed"
  run "$work/h" --init-from "$work/a.h5" --save-initial --set strata.train_steps=1 || die "init from HDF5 failed"
  same_weights "$work/h/ck/step_00000000" || die "step-0 weights differ from the HDF5 file's"
  [[ ! -e $work/h/logs/init_from ]] || die "the converted copy of the HDF5 source was left behind"
fi
echo "init-from: fixture weights bit for bit at step 0, fresh optimizer, resume rules hold"
