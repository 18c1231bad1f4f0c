#!/usr/bin/env bash
# train_gpt with model parallelism, end to end: AXIS "pipeline" (default) runs 2 ranks as 2
# pipeline stages, "tensor" as 2 tensor-parallel parts (heads, MLP and vocabulary split), "3d" 4
# ranks as 2 stages of 2 tensor-parallel parts each. Each way (ZeRO-1, 4 micro-batches, the
# validation loss through the engine) the ranks train like 1 rank — every step's loss and validation loss within 1e-5 relative — and the 2-rank
# checkpoint of step 4 verifies, its planned peak per tier is within 5% of the measured one, exports to the same datasets as the 1-rank one (every parameter
# once, whole), and resumes on 1 rank to step 6.
# usage: train_gpt_pipeline.sh STRATA TRAIN_GPT MPIEXEC [AXIS]
set -u
strata="$1" train_gpt="$2" mpiexec="$3" axis="${4:-pipeline}"
np=2
case "$axis" in
  pipeline) sets="--set strata.pipeline_parallel_size=2" t=pp layout="(dp 1 x tp 1 x pp 2)" ;;
  tensor) sets="--set strata.tensor_parallel_size=2" t=tp layout="(dp 1 x tp 2 x pp 1)" ;;
  3d) sets="--set strata.tensor_parallel_size=2 --set strata.pipeline_parallel_size=2" t=tppp np=4
    layout="(dp 1 x tp 2 x pp 2)" ;;
  *) echo "unknown axis $axis" >&2; exit 2 ;;
esac
source "$(dirname "$0")/tiny_job.sh"
tiny_job "$axis" "$strata"
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

run "$work/${t}2" "$mpiexec" --oversubscribe --bind-to none -np $np "$train_gpt" --metrics m.jsonl \
  $sets || die "the $t 2 run failed"
grep -qF "$layout" "$work/${t}2/log" || die "the $t 2 run did not run as $layout"
# The memory plan train_gpt makes at start-up (every pipeline stage planned, the busiest taken) is
# within 5% of the busiest rank's measured peak on every tier.
awk '/planned at start-up vs measured/ { on = 1; next }
     on && $2 == "planned" { n++; p = $NF; sub(/%/, "", p); if (p + 0 > 5 || p + 0 < -5) { print; bad = 1 } }
     END { exit bad || n < 2 }' "$work/${t}2/log" >&2 ||
  die "the $t 2 run's planned peaks are not within 5% of the measured ones"
run "$work/${t}1" "$train_gpt" --metrics m.jsonl || die "the 1-rank run failed"
for k in loss val_loss; do
  a=$(values $k "$work/${t}2/m.jsonl") b=$(values $k "$work/${t}1/m.jsonl")
  [[ $(wc -w <<<"$a") == $([[ $k == loss ]] && echo 4 || echo 2) ]] ||
    die "the $t 2 run logged $(wc -w <<<"$a") values of $k"
  paste <(echo "$a") <(echo "$b") | awk -v key=$k -v t=$t '
    { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $2) { print key " " NR ": " t " 2 " $1 " vs 1 rank " $2; bad = 1 } }
    END { exit bad }' >&2 || die "$t 2 and 1 rank disagree on $k"
done
# The 2-rank checkpoint verifies and exports to one consolidated file holding what the 1-rank
# run's export holds (every parameter once, same names and shapes).
"$strata" ckpt verify "$work/${t}2/ck/step_00000004" >/dev/null || die "the $t 2 checkpoint does not verify"
for r in ${t}1 ${t}2; do
  "$strata" ckpt export "$work/$r/ck/step_00000004" --output "$work/$r.h5" >/dev/null || die "export of $r failed"
done
diff <(h5ls -r "$work/${t}1.h5" | sort) <(h5ls -r "$work/${t}2.h5" | sort) >&2 ||
  die "the $t 2 export holds other datasets than the 1-rank one"
# The 2-rank checkpoint resumes on one rank (another layout).
run "$work/${t}2" "$train_gpt" --set strata.train_steps=6 || die "resuming the $t 2 checkpoint on 1 rank failed"
grep -q "resumed from ck/step_00000004: step 4" "$work/${t}2/log" || die "the 1-rank run did not resume from step 4"
[[ -f $work/${t}2/ck/step_00000006/manifest.json ]] || die "the resumed run saved no step 6"
echo "$axis: $t 2 = 1 rank (4 losses, 2 validation losses within 1e-5); $t 2 checkpoint exported and resumed on 1 rank"
