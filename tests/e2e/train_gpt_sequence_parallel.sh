#!/usr/bin/env bash
# train_gpt with sequence parallelism (strata.sequence_parallel) end to end, on 2 ranks as 2
# tensor-parallel parts with ZeRO 1: the same job with and without it trains alike (every loss within
# 1e-6 relative; with it each part keeps fewer activation bytes: its tokens' share of what lies
# outside the split layers), and the run stopped after step 2 (--exit-after-steps) resumes from its
# checkpoint with exactly the losses of the run that never stopped.
# usage: train_gpt_sequence_parallel.sh STRATA TRAIN_GPT MPIEXEC
set -u
strata="$1" train_gpt="$2" mpiexec="$3"
source "$(dirname "$0")/tiny_job.sh"
tiny_job sequence_parallel "$strata"
cat >"$work/config.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 2,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "zero_optimization": {"stage": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 7,
    "train_steps": 4,
    "tensor_parallel_size": 2,
    "sequence_parallel": true,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$work/tiny.train.tok", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": 2}
  }
}
EOF

# run DIR ARGS...: train_gpt on 2 ranks in DIR (checkpoints in DIR/ck, metrics appended to
# DIR/m.jsonl), log in DIR/log.
run() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  (cd "$dir" && "$mpiexec" --oversubscribe --bind-to none -np 2 "$train_gpt" --config "$work/config.json" \
    --checkpoint-dir ck --metrics m.jsonl --threads 1 "$@" >>log 2>&1)
}
losses() { grep -o '"loss":[^,}]*' "$1" | cut -d: -f2; }
# The activation peak of rank 0 (bytes) from the log's ledger table.
activations() {
  awk '$1 == "device" && $2 == "activations" { v = $5; u = $6 }
       END { m = u == "B" ? 1 : u == "KiB" ? 1024 : u == "MiB" ? 1048576 : 0; printf "%d\n", v * m }' "$1"
}

run "$work/sp" || die "the run with sequence parallelism failed"
grep -qF "(dp 1 x tp 2 x pp 1)" "$work/sp/log" || die "the run did not run as (dp 1 x tp 2 x pp 1)"
run "$work/plain" --set strata.sequence_parallel=false || die "the run without sequence parallelism failed"
a=$(losses "$work/sp/m.jsonl") b=$(losses "$work/plain/m.jsonl")
[[ $(wc -w <<<"$a") == 4 && $(wc -w <<<"$b") == 4 ]] || die "the runs did not log 4 losses each"
paste <(echo "$a") <(echo "$b") | awk '
  { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $2) { print "step " NR ": " $1 " with sequence parallelism, " $2 " without"; bad = 1 } }
  END { exit bad }' >&2 || die "the losses with and without sequence parallelism differ by more than 1e-6 relative"
# Sequence parallelism was on: each part kept only its tokens' LayerNorm outputs and residuals.
sp_act=$(activations "$work/sp/log") plain_act=$(activations "$work/plain/log")
((sp_act > 0 && sp_act < plain_act)) ||
  die "activation peak with sequence parallelism $sp_act B is not below the $plain_act B without it"
# Stopped after step 2 (its checkpoint), then resumed to step 4 in a new job.
run "$work/resumed" --exit-after-steps 2 || die "the interrupted run failed"
[[ -f $work/resumed/ck/step_00000002/manifest.json ]] || die "no checkpoint at step 2 after --exit-after-steps 2"
run "$work/resumed" || die "the resumed run failed"
grep -q "resumed from ck/step_00000002: step 2" "$work/resumed/log" || die "the second run did not resume from step 2"
diff <(echo "$a") <(losses "$work/resumed/m.jsonl") >&2 ||
  die "the resumed run's losses differ from the run that never stopped"
echo "sequence parallel at tp 2: 4 losses within 1e-6 of the run without it (activation peak" \
  "$sp_act B vs $plain_act B); stopped at step 2 and resumed, the same 4 losses bitwise"
