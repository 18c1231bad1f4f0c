#!/usr/bin/env bash
# End-to-end checkpoint tests of train_gpt on a tiny corpus made here (`strata data prepare`).
# usage: train_gpt_resume.sh MODE STRATA TRAIN_GPT [LAUNCHER...]
#   resume   6 steps straight vs 3 steps (--exit-after-steps) + 3 resumed in a new process:
#            identical losses and identical exported weights; retention keeps the newest 2;
#            progress files say 3 and then "done 6".
#   sigterm  SIGTERM during a long run: exit status 0, a verified checkpoint of the step the
#            progress file names.
# LAUNCHER (e.g. mpirun -np 2 --oversubscribe) prefixes every train_gpt command.
set -u
mode="$1" strata="$2" train_gpt="$3"
shift 3
launcher=("$@")
source "$(dirname "$0")/tiny_job.sh"
tiny_job resume "$strata"

steps=6
[[ $mode == sigterm ]] && steps=1000000
cat >"$work/config.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 7,
    "train_steps": $steps,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$work/tiny.train.tok", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": 2, "save_total_limit": 2}
  }
}
EOF

# run DIR ARGS...: train_gpt in DIR (relative checkpoint dir "ck", so configs match), log in DIR/log.
run() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  (cd "$dir" && STRATA_PROGRESS_DIR="$dir/progress" "${launcher[@]}" "$train_gpt" \
    --config "$work/config.json" --checkpoint-dir ck --threads 1 "$@" >>log 2>&1)
}
losses() { grep -o '"loss":[^,]*' "$1"; }

if [[ $mode == resume ]]; then
  run "$work/a" --metrics m.jsonl || die "straight run failed"
  run "$work/b" --metrics m.jsonl --exit-after-steps 3 || die "interrupted run failed"
  [[ -f $work/b/ck/step_00000003/manifest.json ]] || die "no checkpoint at step 3 after --exit-after-steps 3"
  [[ $(cat "$work/b/progress/rank_00000.progress") == 3 ]] || die "progress after the interruption is not 3"
  run "$work/b" --metrics m.jsonl || die "resumed run failed"
  grep -q "resumed from ck/step_00000003: step 3" "$work/b/log" || die "the second run did not resume"
  [[ $(cat "$work/b/progress/rank_00000.progress") == "done 6" ]] || die "progress is not 'done 6'"
  [[ $(losses "$work/a/m.jsonl" | wc -l) == 6 ]] || die "straight run did not log 6 losses"
  diff <(losses "$work/a/m.jsonl") <(losses "$work/b/m.jsonl") >&2 ||
    die "losses of the resumed run differ from the straight run"
  [[ $(ls "$work/a/ck" | grep -c '^step_') == 2 && -d $work/a/ck/step_00000004 && -d $work/a/ck/step_00000006 ]] ||
    die "retention (save_total_limit 2) did not keep exactly steps 4 and 6: $(ls "$work/a/ck")"
  "$strata" ckpt export "$work/a/ck" --output "$work/a.h5" >/dev/null || die "export a failed"
  "$strata" ckpt export "$work/b/ck" --output "$work/b.h5" >/dev/null || die "export b failed"
  # Every dataset bitwise equal (root attributes name the source directory, so skip them).
  h5diff --exclude-attribute / "$work/a.h5" "$work/b.h5" >&2 ||
    die "exported weights of the resumed run differ from the straight run"
  echo "resume: 6 losses and the exported weights are identical"
elif [[ $mode == sigterm ]]; then
  mkdir -p "$work/s"
  cd "$work/s" || die "cannot enter $work/s"
  # Started directly (not in a subshell) so that $! is train_gpt itself.
  STRATA_PROGRESS_DIR="$work/s/progress" "$train_gpt" --config "$work/config.json" \
    --checkpoint-dir ck --threads 1 >log 2>&1 &
  pid=$!
  prog="$work/s/progress/rank_00000.progress"
  for _ in $(seq 1 600); do
    [[ -f $prog && $(cat "$prog" 2>/dev/null) -ge 3 ]] 2>/dev/null && break
    kill -0 $pid 2>/dev/null || die "train_gpt ended before it was signalled"
    sleep 0.1
  done
  [[ -f $prog ]] || die "no progress file after 60 s"
  kill -TERM $pid
  wait $pid
  rc=$?
  [[ $rc == 0 ]] || die "exit status $rc after SIGTERM (want 0)"
  step=$(cat "$prog")
  [[ $step =~ ^[0-9]+$ ]] || die "progress file says '$step' after SIGTERM (want a step number)"
  grep -q "stopping after step $step (SIGTERM)" "$work/s/log" || die "no 'stopping after step $step' line"
  dir=$(printf "%s/s/ck/step_%08d" "$work" "$step")
  [[ -f $dir/manifest.json ]] || die "no checkpoint of step $step"
  "$strata" ckpt verify "$dir" >&2 || die "checkpoint of step $step does not verify"
  echo "sigterm: stopped after step $step with exit status 0 and a verified checkpoint"
else
  die "unknown mode $mode"
fi
