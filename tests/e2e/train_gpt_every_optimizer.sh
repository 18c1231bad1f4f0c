#!/usr/bin/env bash
# Every optimizer.type through train_gpt (config, start-up memory plan, training, validation):
# 4 steps of a small GPT each, the 1-bit ones past their freeze_step, and the 1-bit ones again on
# 2 ranks (the compressed exchange). Each run must finish and report a finite validation loss.
# A type that works in the unit and distributed tests but not in the program fails here.
# usage: train_gpt_every_optimizer.sh STRATA TRAIN_GPT MPIEXEC
set -u
here=$(dirname "$0")
. "$here/tiny_job.sh"
tiny_job every_optimizer "$1"
train_gpt="$2" mpiexec="$3"

params() {  # the optimizer section of each type (each takes only its own parameters)
  case $1 in
    Adafactor) echo '{"type": "Adafactor", "params": {}}' ;;
    SGD) echo '{"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}' ;;
    Lamb) echo '{"type": "Lamb", "params": {"lr": 0.01, "weight_decay": 0.01}}' ;;
    OneBitAdam) echo '{"type": "OneBitAdam", "params": {"lr": 0.001, "freeze_step": 2}}' ;;
    OneBitLamb) echo '{"type": "OneBitLamb", "params": {"lr": 0.01, "weight_decay": 0.01, "freeze_step": 2}}' ;;
    *) echo "{\"type\": \"$1\", \"params\": {\"lr\": 0.001}}" ;;
  esac
}

run() {  # run NAME TYPE [LAUNCHER...]
  local name=$1 type=$2
  shift 2
  mkdir -p "$work/$name"
  cat >"$work/$name/config.json" <<JSON
{"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "optimizer": $(params "$type"),
 "strata": {"seed": 3, "train_steps": 4,
            "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
            "data": {"train": "$work/tiny.train.tok", "valid": "$work/tiny.val.tok"},
            "eval": {"interval": 4, "iters": 2}}}
JSON
  "$@" "$train_gpt" --config "$work/$name/config.json" --threads 1 --metrics "$work/$name/m.jsonl" \
    --log-dir "$work/$name/logs" >"$work/$name/log" 2>&1 || die "$name: train_gpt failed"
  local v
  v=$(grep -o '"val_loss":[0-9.eE+-]*' "$work/$name/m.jsonl" | tail -n 1 | cut -d: -f2)
  awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 10) }' || die "$name: no finite validation loss ($v)"
  echo "$name: val loss $v"
}

for t in AdamW Adam SGD AdamW8bit Adafactor Lamb OneBitAdam OneBitLamb Lion Lion8bit; do run "$t" "$t"; done
for t in OneBitAdam OneBitLamb; do
  run "${t}_np2" "$t" "$mpiexec" --oversubscribe --bind-to none -np 2
done
echo "PASS"
