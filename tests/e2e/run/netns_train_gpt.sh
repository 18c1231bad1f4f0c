#!/usr/bin/env bash
# Two "nodes" on one machine (cluster/netns: network namespaces on a private bridge, each with its
# own hostname), 2 ranks each: train_gpt with tensor parallelism inside a node (tp 2: ranks 0-1 on
# n1, 2-3 on n2) and data parallelism across the nodes (dp 2), launched by `strata run` from n1
# through Open MPI's rsh launcher (cluster/netns/rsh), TCP between the nodes. Node n2's ranks are
# all killed mid-run; the launcher restarts the job on both nodes, train_gpt resumes from its
# newest complete checkpoint, and the final checkpoint's export is bitwise equal to that of an
# uninterrupted run on the same two nodes. Needs root (ip netns, unshare --uts): otherwise it
# exits 77 (skipped) saying why.
# usage: netns_train_gpt.sh STRATA TRAIN_GPT SOURCE_DIR
set -u
strata=$1 train_gpt=$2 src=$3
net="$src/cluster/netns"
skip() { echo "SKIP: $*"; exit 77; }
. "$(dirname "$0")/netns_require.sh"
. "$(dirname "$0")/elastic_lib.sh"  # rank_step, node_ranks
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
  for f in "$T"/*/err "$T"/*/out "$T"/*/logs/rank_*.log; do [[ -f "$f" ]] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}
"$net/up" 2 || fail "cluster/netns/up 2 failed"
printf 'n1 slots=2\nn2 slots=2\n' >"$T/hostfile"

for i in $(seq 1 400); do
  echo "line $i: sphinx of black quartz, judge my vow, $((i * 7 % 11)) times"
done >"$T/corpus.txt"
"$strata" data prepare --input "$T/corpus.txt" --output "$T/tiny" >/dev/null || fail "data prepare failed"
steps=60  # room between the kill at step 9 and the end, also on a slow machine
cat >"$T/config.json" <<JSON
{
  "train_micro_batch_size_per_gpu": 4,
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

# launch DIR ARGS...: `strata run` on node n1 over both nodes, in DIR, in the background.
launch() {
  local dir=$1
  shift
  mkdir -p "$dir"
  (cd "$dir" && OMP_NUM_THREADS=1 exec "$net/enter" n1 "$strata" run -n 4 --hostfile "$T/hostfile" \
    --mpi-arg=--mca --mpi-arg=plm_rsh_agent --mpi-arg="$net/rsh" \
    --mpi-arg=--mca --mpi-arg=oob_tcp_if_include --mpi-arg=10.213.0.0/24 \
    --mpi-arg=--mca --mpi-arg=btl_tcp_if_include --mpi-arg=10.213.0.0/24 \
    --mpi-arg=--mca --mpi-arg=btl --mpi-arg=self,vader,tcp \
    --log-dir logs "$@" -- "$train_gpt" --config "$T/config.json" --checkpoint-dir ck \
    --threads 1 >out 2>err) &
  launcher=$!
}
finish() {
  wait "$launcher"
  rc=$?
  launcher=""
}
step_of() { rank_step "$T/b/logs/progress" "$1"; }

launch "$T/a"
finish
[[ $rc == 0 ]] || fail "the uninterrupted run failed ($rc)"
grep -q "dp 2 x tp 2 x pp 1" "$T/a/out" || fail "the run is not dp 2 x tp 2"

launch "$T/b" --max-restarts 3 --restart-delay 0.5
for _ in $(seq 1 1200); do (( $(step_of 2) >= 9 )) && break; sleep 0.05; done
(( $(step_of 2) >= 9 )) || fail "rank 2 (node n2) did not reach step 9"
victims=$(node_ranks n2)
[[ $(wc -w <<<"$victims") == 2 ]] || fail "node n2 runs $(wc -w <<<"$victims") train_gpt processes, not 2"
echo "kill -9 node n2's ranks (pids $(echo $victims)) at step $(step_of 2)"
kill -KILL $victims
finish
[[ $rc == 0 ]] || fail "the interrupted run: exit status $rc"
grep -Eq "attempt 1: failed after .*killed by signal 9" "$T/b/err" || fail "the kill is not in the summary"
grep -q "resumed from ck/step_" "$T/b/out" || fail "attempt 2 did not resume from a checkpoint"
[[ $(cat "$T/b/logs/progress/rank_00002.progress") == "done $steps" ]] || fail "rank 2 did not finish"

"$strata" ckpt export "$T/a/ck" --output "$T/a.h5" >/dev/null || fail "export a failed"
"$strata" ckpt export "$T/b/ck" --output "$T/b.h5" >/dev/null || fail "export b failed"
h5diff --exclude-attribute / "$T/a.h5" "$T/b.h5" || fail "the exported weights differ"
echo "ok: 2 nodes x 2 ranks (tp 2 in a node, dp 2 across); node n2 killed, the job restarted on both nodes and resumed; bitwise equal export"
