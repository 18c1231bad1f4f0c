#!/usr/bin/env bash
# train_gpt with pipeline stages, end to end: 2 ranks as 2 stages (ZeRO-1, 4 micro-batches, the
# validation loss through the stages) train like 1 rank — every step's loss and validation loss
# within 1e-5 relative — and the pp = 2 checkpoint of step 4 verifies, exports to the same
# datasets as the 1-rank one, and resumes on 1 rank to step 6.
# usage: train_gpt_pipeline.sh STRATA TRAIN_GPT MPIEXEC
set -u
strata="$1" train_gpt="$2" mpiexec="$3"
source "$(dirname "$0")/tiny_job.sh"
tiny_job pipeline "$strata"
cat >"$work/config.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "zero_optimization": {"stage": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 7,
    "train_steps": 4,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$work/tiny.train.tok", "valid": "$work/tiny.val.tok"},
    "eval": {"interval": 2, "iters": 2},
    "checkpoint": {"interval": 4}
  }
}
EOF

# run DIR ARGS...: train_gpt in DIR (checkpoints in DIR/ck), log in DIR/log.
run() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  (cd "$dir" && "$@" --config "$work/config.json" --checkpoint-dir ck --threads 1 >>log 2>&1)
}
values() { grep -o "\"$1\":[^,}]*" "$2" | cut -d: -f2; }

run "$work/pp2" "$mpiexec" --oversubscribe --bind-to none -np 2 "$train_gpt" --metrics m.jsonl \
  --set strata.pipeline_parallel_size=2 || die "the pp 2 run failed"
grep -q "(dp 1 x tp 1 x pp 2)" "$work/pp2/log" || die "the pp 2 run did not run 2 stages"
run "$work/pp1" "$train_gpt" --metrics m.jsonl || die "the 1-rank run failed"
for key in loss val_loss; do
  a=$(values $key "$work/pp2/m.jsonl") b=$(values $key "$work/pp1/m.jsonl")
  [[ $(wc -w <<<"$a") == $([[ $key == loss ]] && echo 4 || echo 2) ]] ||
    die "the pp 2 run logged $(wc -w <<<"$a") values of $key"
  paste <(echo "$a") <(echo "$b") | awk -v key=$key '
    { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $2) { print key " " NR ": pp 2 " $1 " vs 1 rank " $2; bad = 1 } }
    END { exit bad }' >&2 || die "pp 2 and 1 rank disagree on $key"
done
# The pipeline's checkpoint verifies and exports to one consolidated file holding what the 1-rank
# run's export holds (every parameter once, same names and shapes).
"$strata" ckpt verify "$work/pp2/ck/step_00000004" >/dev/null || die "the pp 2 checkpoint does not verify"
for r in pp1 pp2; do
  "$strata" ckpt export "$work/$r/ck/step_00000004" --output "$work/$r.h5" >/dev/null || die "export of $r failed"
done
diff <(h5ls -r "$work/pp1.h5" | sort) <(h5ls -r "$work/pp2.h5" | sort) >&2 ||
  die "the pp 2 export holds other datasets than the 1-rank one"
# The pipeline's checkpoint resumes on one rank (another layout).
run "$work/pp2" "$train_gpt" --set strata.train_steps=6 || die "resuming the pp 2 checkpoint on 1 rank failed"
grep -q "resumed from ck/step_00000004: step 4" "$work/pp2/log" || die "the 1-rank run did not resume from step 4"
[[ -f $work/pp2/ck/step_00000006/manifest.json ]] || die "the resumed run saved no step 6"
echo "pipeline: pp 2 = 1 rank (4 losses, 2 validation losses within 1e-5); pp 2 checkpoint exported and resumed on 1 rank"
