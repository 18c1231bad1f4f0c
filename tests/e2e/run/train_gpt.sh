#!/usr/bin/env bash
# `strata run` with the real train_gpt: a tiny model on a tiny corpus, 2 ranks; one rank is
# killed with SIGKILL mid-run, the launcher restarts the job, train_gpt resumes from its newest
# complete checkpoint, and the final checkpoint's export is bitwise equal to an uninterrupted
# run's. usage: train_gpt.sh STRATA TRAIN_GPT   (FAULTS_SEED=n repeats a random run)
set -u
strata=$1
train_gpt=$2
T=$(mktemp -d)
launcher=""
seed=${FAULTS_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
cleanup() {
  if [[ -n "$launcher" ]] && kill -0 "$launcher" 2>/dev/null; then kill -KILL "$launcher"; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL (FAULTS_SEED=$seed): $*"
  for f in "$T"/*/err "$T"/*/logs/rank_*.log; do [[ -f "$f" ]] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}

for i in $(seq 1 400); do
  echo "line $i: pack my box with five dozen liquor jugs, $((i * 7 % 11)) times"
done >"$T/corpus.txt"
"$strata" data prepare --input "$T/corpus.txt" --output "$T/tiny" >/dev/null || fail "data prepare failed"
steps=40
cat >"$T/config.json" <<JSON
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 2},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 11,
    "train_steps": $steps,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$T/tiny.train.tok", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": 4, "save_total_limit": 2}
  }
}
JSON

# launch DIR ARGS...: strata run ARGS -- train_gpt, in DIR (checkpoints in DIR/ck, relative, so
# both runs have the same config), in the background.
launch() {
  local dir=$1
  shift
  mkdir -p "$dir"
  cd "$dir" || fail "cannot enter $dir"
  OMP_NUM_THREADS=1 "$strata" run --log-dir logs "$@" -- "$train_gpt" --config "$T/config.json" \
    --checkpoint-dir ck --threads 1 >out 2>err &
  launcher=$!
  cd "$T" || fail "cannot enter $T"
}
finish() {
  wait "$launcher"
  rc=$?
  launcher=""
}
step_of() {
  local s
  s=$(cat "$T/b/logs/progress/rank_$(printf %05d "$1").progress" 2>/dev/null) || { echo -1; return; }
  echo "${s#done }"
}
reached() { (( $(step_of "$1") >= $2 )); }
# The pid of the train_gpt process of world rank $1 under the launcher.
rank_pid() {
  local p
  for p in $(pgrep -f -- "--config $T/config.json"); do
    [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$(readlink -f "$train_gpt")" ]] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return 0; }
  done
  return 1
}

launch "$T/a" -n 2
finish
[[ $rc == 0 ]] || fail "the uninterrupted run failed ($rc)"

victim=$(( RANDOM % 2 ))
target=$(( 6 + RANDOM % 20 ))
launch "$T/b" -n 2 --max-restarts 3 --restart-delay 0.2
for _ in $(seq 1 1200); do reached $victim $target && break; sleep 0.05; done
reached $victim $target || fail "rank $victim did not reach step $target"
pid=$(rank_pid $victim) || fail "cannot find rank $victim's train_gpt"
echo "kill -9 rank $victim (pid $pid) at step $(step_of $victim)"
kill -KILL "$pid"
finish
[[ $rc == 0 ]] || fail "the interrupted run: exit status $rc"
grep -Eq "attempt 1: failed after .*rank $victim killed by signal 9" "$T/b/err" || fail "the kill is not in the summary"
grep -q "resumed from ck/step_" "$T/b/out" || fail "attempt 2 did not resume from a checkpoint"
[[ $(cat "$T/b/logs/progress/rank_00000.progress") == "done $steps" ]] || fail "rank 0 did not finish"

"$strata" ckpt export "$T/a/ck" --output "$T/a.h5" >/dev/null || fail "export a failed"
"$strata" ckpt export "$T/b/ck" --output "$T/b.h5" >/dev/null || fail "export b failed"
# Every dataset bitwise equal (the root attributes name the source directory: skipped).
h5diff --exclude-attribute / "$T/a.h5" "$T/b.h5" || fail "the exported weights differ"
echo "ok: train_gpt rank $victim killed, the job restarted and resumed; bitwise equal export"
