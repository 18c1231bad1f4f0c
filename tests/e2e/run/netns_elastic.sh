#!/usr/bin/env bash
# Elastic restarts (`strata run --nodes MIN:MAX`) on two "nodes" on one machine (cluster/netns),
# 2 ranks each, tp 2 inside a node and dp 2 across, micro-batch 4 and gradient accumulation 1
# given in the config (global batch 8). Node n2 is taken away mid-run: its link goes down and
# every process in it is frozen (SIGSTOP), so the ranks on n1 hang in their next collective and the
# watchdog ends the attempt. Then, by MODE:
#   shrink  --nodes 1:2: n2 never answers the probe; after --node-grace the job restarts on n1
#           alone (dp 1, accumulation 2: the launcher passes --set overrides), resumes from the
#           last complete checkpoint and finishes; every step's loss is within 1e-5 relative of
#           an uninterrupted run of the same global batch, the exported weights within 1e-5
#           relative L2 per parameter (compare_exports), and the first step after the change
#           carries the "resize" mark in the metrics.
#   grow    as shrink, then n2's link comes back: the job saves at the next step and grows back
#           to both nodes (dp 2, accumulation 1), and finishes there; losses as above.
#   wait    --nodes 2:2: the launcher waits --node-grace for n2, then gives up (exit 4) naming it.
#   nodivide  n1 runs 2 ranks and n2 1, tp 1 and micro-batch 2 (global batch 6 on dp 3): without
#           n2, dp 2 cannot keep it (6 is not a multiple of 2 x 2): one-line error, exit 1.
#   health  node n2 stays, but its ranks are killed (SIGKILL) in two attempts in a row: the
#           launcher leaves it out and the job finishes on n1; losses as above.
# Needs root (ip netns, unshare --uts): otherwise it exits 77 (skipped) saying why.
# usage: netns_elastic.sh MODE STRATA TRAIN_GPT SOURCE_DIR
set -u
mode=$1 strata=$2 train_gpt=$3 src=$4
net="$src/cluster/netns"
skip() { echo "SKIP: $*"; exit 77; }
. "$(dirname "$0")/netns_require.sh"
. "$(dirname "$0")/elastic_lib.sh"
require_netns
T=$(mktemp -d)
launcher=""
cleanup() {
  if [[ -n "$launcher" ]] && kill -0 "$launcher" 2>/dev/null; then kill -KILL "$launcher"; fi
  "$net/down" >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$T"/*/err "$T"/*/out "$T"/b/logs/elastic.log "$T"/b/logs/rank_*.log; do
    [[ -f "$f" ]] && { echo "--- $f"; tail -n 40 "$f"; }
  done
  exit 1
}
"$net/up" 2 >/dev/null || fail "cluster/netns/up 2 failed"
printf 'n1 slots=2\nn2 slots=2\n' >"$T/hostfile"
extra=()
if [[ $mode == nodivide ]]; then
  printf 'n1 slots=2\nn2 slots=1\n' >"$T/hostfile"
  extra=(--set strata.tensor_parallel_size=1 --set train_micro_batch_size_per_gpu=2)
fi

for i in $(seq 1 400); do
  echo "line $i: sphinx of black quartz, judge my vow, $((i * 7 % 11)) times"
done >"$T/corpus.txt"
"$strata" data prepare --input "$T/corpus.txt" --output "$T/tiny" >/dev/null || fail "data prepare failed"
steps=16
[[ $mode == grow ]] && steps=32  # room for growing back before the end
cat >"$T/config.json" <<JSON
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "zero_optimization": {"stage": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 13,
    "train_steps": $steps,
    "tensor_parallel_size": 2,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$T/tiny.train.tok", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": 4, "save_total_limit": 2}
  }
}
JSON
mpi_args=(--mpi-arg=--mca --mpi-arg=plm_rsh_agent --mpi-arg="$net/rsh"
  --mpi-arg=--mca --mpi-arg=oob_tcp_if_include --mpi-arg=10.213.0.0/24
  --mpi-arg=--mca --mpi-arg=btl_tcp_if_include --mpi-arg=10.213.0.0/24
  --mpi-arg=--mca --mpi-arg=btl --mpi-arg=self,vader,tcp)

# The reference: the same global batch (8) without interruption, on one node: tp 2, dp 1,
# accumulation 2 (only in shrink and grow).
if [[ $mode != wait && $mode != nodivide ]]; then
  mkdir -p "$T/a"
  (cd "$T/a" && OMP_NUM_THREADS=1 "$strata" run -n 2 --log-dir logs -- "$train_gpt" \
    --config "$T/config.json" --set gradient_accumulation_steps=2 --checkpoint-dir ck --metrics m.jsonl \
    --threads 1 >out 2>err) || fail "the reference run failed"
fi

case $mode in
  wait) range=2:2 ;;
  *) range=1:2 ;;
esac
mkdir -p "$T/b"
(cd "$T/b" && OMP_NUM_THREADS=1 exec "$net/enter" n1 "$strata" run --nodes $range \
  --hostfile "$T/hostfile" --node-grace 2 --watchdog 3 --watchdog-startup 60 --restart-delay 0.5 \
  --max-restarts 3 --kill-grace 1 "${mpi_args[@]}" --log-dir logs -- "$train_gpt" \
  --config "$T/config.json" --checkpoint-dir ck --metrics m.jsonl --threads 1 "${extra[@]}" >out 2>err) &
launcher=$!
step_of() { rank_step "$T/b/logs/progress" "$1"; }
for _ in $(seq 1 1200); do (($(step_of 2) >= 5)) && break; sleep 0.05; done
(($(step_of 2) >= 5)) || fail "rank 2 (node n2) did not reach step 5"
if [[ $mode == health ]]; then
  echo "kill -9 node n2's ranks at step $(step_of 2)"
  kill -KILL $(node_ranks n2)
  for _ in $(seq 1 1200); do
    grep -q "attempt 2 (restart 1" "$T/b/err" 2>/dev/null && (($(step_of 2) >= 6)) && break
    sleep 0.05
  done
  (($(step_of 2) >= 6)) || fail "attempt 2 did not run on n2 again"
  echo "kill -9 node n2's ranks again at step $(step_of 2)"
  taken=$SECONDS taken_ns=$(date +%s%N)
  kill -KILL $(node_ranks n2)
else
  echo "node n2 taken away at step $(step_of 2): link down, every process in it frozen (SIGSTOP)"
  taken=$SECONDS taken_ns=$(date +%s%N)
  # A node that dies silently: no process on it answers, nothing reaches the others (its ranks and
  # Open MPI's daemon there are stopped, so no connection is closed; the launcher kills them with
  # the rest of the attempt).
  ip -n strata-n2 link set eth0 down
  pids=$(ip netns pids strata-n2)
  [[ -n $pids ]] && kill -STOP $pids
fi
# The time from the loss of n2 to the restart on the nodes that remain.
restart_line="attempt 2"
[[ $mode == health ]] && restart_line="attempt 3"
for _ in $(seq 1 1200); do
  grep -q "$restart_line" "$T/b/err" 2>/dev/null && break
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.05
done
grep -q "$restart_line" "$T/b/err" &&
  echo "restarted $(( ($(date +%s%N) - taken_ns) / 1000000 )) ms after n2 was taken away (--watchdog 3, --kill-grace 1, --node-grace 2)"

if [[ $mode == grow ]]; then
  # Back once the job runs on n1 alone and made a few steps there.
  for _ in $(seq 1 1200); do
    grep -q "attempt 2: 2 ranks on n1:2" "$T/b/err" 2>/dev/null && (($(step_of 0) >= 6)) && break
    sleep 0.1
  done
  grep -q "attempt 2: 2 ranks on n1:2" "$T/b/err" || fail "the job did not restart on n1 alone"
  echo "node n2 back at step $(step_of 0)"
  ip -n strata-n2 link set eth0 up
  hold_until_growing n1 "$T/b/err" "$T/b/logs/progress"
fi

wait "$launcher"
rc=$?
launcher=""
grep "strata run:" "$T/b/err" | sed 's/^/  /'
if [[ $mode == nodivide ]]; then
  [[ $rc == 1 ]] || fail "a global batch that does not divide: exit status $rc, not 1"
  grep -q "^strata.*cannot keep the global batch 6 on 2 ranks (data-parallel size 2): it is not divisible by micro-batch 2 × dp 2 = 4; stopping" "$T/b/err" ||
    fail "no one-line error saying the batch cannot be kept"
  echo "ok: the global batch 6 cannot be kept on dp 2: one-line error, exit 1"
  exit 0
fi
if [[ $mode == wait ]]; then
  [[ $rc == 4 ]] || fail "--nodes 2:2 without n2: exit status $rc, not 4"
  grep -q "giving up: 1 node can run the job (n1) and --nodes 2:2 needs at least 2; node n2 did not answer within --node-grace 2 s" "$T/b/err" ||
    fail "no clear message naming n2 and --nodes 2:2"
  grep -q "waiting up to 2 s (--node-grace) for it to come back" "$T/b/err" || fail "it did not wait for n2"
  echo "ok: --nodes 2:2 without n2: waited --node-grace, then exit 4 naming n2 ($((SECONDS - taken)) s after n2 went away)"
  exit 0
fi
[[ $rc == 0 ]] || fail "the elastic run: exit status $rc"
if [[ $mode == health ]]; then
  grep -q "node n2 is left out: its ranks failed first in 2 attempts in a row" "$T/b/err" ||
    fail "n2 was not named and left out"
  grep -q "resizing 2 -> 1 node (n1): 4 -> 2 ranks, dp 2 -> 1, gradient accumulation 1 -> 2, global batch 8 kept: node n2 left out (its ranks failed first twice in a row)" "$T/b/err" ||
    fail "no shrink line with its reason"
else
  grep -q "watchdog: no rank made progress" "$T/b/err" || fail "the hang was not ended by the watchdog"
  grep -q "resizing 2 -> 1 node (n1): 4 -> 2 ranks, dp 2 -> 1, gradient accumulation 1 -> 2, global batch 8 kept: node n2 did not answer within --node-grace 2 s" "$T/b/err" ||
    fail "no shrink line with its reason"
fi
grep -q "resizing 2 -> 1 node" "$T/b/logs/elastic.log" || fail "the change is not in logs/elastic.log"
grep -q "resumed from ck/step_" "$T/b/out" || fail "the restart did not resume from a checkpoint"
grep -q '"resize":"2 -> 1 node (n1)' "$T/b/m.jsonl" || fail "the metrics do not mark the shrink"
if [[ $mode == grow ]]; then
  grep -q "resizing 1 -> 2 nodes (n1,n2): 2 -> 4 ranks, dp 1 -> 2, gradient accumulation 2 -> 1, global batch 8 kept: node n2 answers again" "$T/b/err" ||
    fail "no grow-back line"
  grep -q '"resize":"1 -> 2 nodes (n1,n2)' "$T/b/m.jsonl" || fail "the metrics do not mark the growth"
  [[ $(cat "$T/b/logs/progress/rank_00003.progress") == "done $steps" ]] || fail "rank 3 (n2) did not finish"
  tail -n 1 "$T/b/m.jsonl" | grep -q '"data_parallel_size":2' || fail "the last step is not on dp 2"
else
  [[ $(cat "$T/b/logs/progress/rank_00000.progress") == "done $steps" ]] || fail "rank 0 did not finish"
  tail -n 1 "$T/b/m.jsonl" | grep '"data_parallel_size":1,' | grep -q '"gradient_accumulation_steps":2,' ||
    fail "the last step is not on dp 1 with accumulation 2"
fi

# Every step's loss (the last line of a step that was run twice) against the reference.
compare_losses "$T/a/m.jsonl" "$T/b/m.jsonl" "$steps" || fail "the elastic run's losses differ from the uninterrupted run's"
# The final weights, exported: each parameter within 1e-5 relative L2 of the uninterrupted run's,
# the key biases within 1e-4 absolute (compare_exports, as the 3D tests compare masters). Element
# by element no relative bound holds:
# dp 2 and dp 1 x accumulation 2 sum the gradients in different orders, and Adam's normalised
# update turns a last-bit difference in a near-zero gradient into a visible one in that weight.
"$strata" ckpt export "$T/a/ck" --output "$T/a.h5" >/dev/null || fail "export a failed"
"$strata" ckpt export "$T/b/ck" --output "$T/b.h5" >/dev/null || fail "export b failed"
compare_exports "$T/a.h5" "$T/b.h5" || fail "the exported weights differ from the uninterrupted run's"
echo "ok ($mode): n2 taken away, the job went on on n1 ($((SECONDS - taken)) s from the loss of n2 to the end)"
