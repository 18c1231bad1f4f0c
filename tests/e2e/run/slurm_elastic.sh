#!/usr/bin/env bash
# Elastic restarts inside a real Slurm allocation (cluster/slurm on two cluster/netns nodes): sbatch
# --no-kill of examples/slurm/train_gpt.sbatch on 2 nodes x 2 tasks with `strata run --nodes 1:2`
# (from the allocation: no host list), global batch 16 (dp 4, micro-batch 4). Node n2 is taken
# away mid-run: its link goes down and every process on it (slurmd, the ranks) is frozen. The
# watchdog ends the hung attempt, n2 does not answer the probe (mpirun starts its daemon there
# through srun, which cannot reach n2's slurmd), and the job goes on on n1 (dp 2, accumulation 2)
# to the end; every step's loss is within 1e-5 relative of a one-process run of the same global
# batch. ctest run_slurm_elastic (label multinode). Needs root, namespaces, slurm-wlm and
# munge: otherwise it exits 77 (skipped). (--time 10: the script asks for SIGTERM 300 s before the
# limit, which a 5-minute job gets at once.) usage: slurm_elastic.sh STRATA TRAIN_GPT SOURCE_DIR
set -u
strata=$1 train_gpt=$2 src=$3
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "not root: network namespaces and slurmd need root"
for p in slurmctld slurmd munged; do
  [[ -x /usr/sbin/$p ]] || skip "/usr/sbin/$p not found (apt-get install -y slurm-wlm munge)"
done
command -v sbatch >/dev/null || skip "sbatch not found (apt-get install -y slurm-wlm)"
ip netns add strata-probe-$$ 2>/dev/null || skip "ip netns add is not allowed here"
ip netns del strata-probe-$$
T=$(mktemp -d)
slurm=$T/slurm
cleanup() {
  "$src/cluster/slurm/down" "$slurm" >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$T"/job/out "$T"/job/strata-logs/*/elastic.log "$T"/job/strata-logs/*/probe/*.log "$slurm"/slurmctld.log; do
    [[ -f "$f" ]] && { echo "--- $f"; tail -n 30 "$f"; }
  done
  exit 1
}
"$src/cluster/slurm/up" 2 "$slurm" >/dev/null || fail "cluster/slurm/up 2 failed"
export SLURM_CONF=$slurm/slurm.conf
on_n1() { "$src/cluster/slurm/enter" n1 "$@"; }
for i in $(seq 1 400); do
  echo "line $i: sphinx of black quartz, judge my vow, $((i * 7 % 11)) times"
done >"$T/corpus.txt"
"$strata" data prepare --input "$T/corpus.txt" --output "$T/tiny" >/dev/null || fail "data prepare failed"
steps=20
cat >"$T/config.json" <<JSON
{
  "train_batch_size": 16,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "zero_optimization": {"stage": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 13,
    "train_steps": $steps,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$T/tiny.train.tok", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": 4}
  }
}
JSON
mkdir -p "$T/ref" "$T/job"
(cd "$T/ref" && OMP_NUM_THREADS=1 "$train_gpt" --config "$T/config.json" --checkpoint-dir ck \
  --threads 1 --metrics m.jsonl >out 2>&1) || fail "the one-process run failed"
job=$(cd "$T/job" && STRATA=$strata TRAIN_GPT=$train_gpt STRATA_CKPT_DIR=$T/job/ck \
  STRATA_RUN_ARGS="--nodes 1:2 --node-grace 2 --watchdog 3 --watchdog-startup 60 --restart-delay 0.5 --kill-grace 1" \
  OMPI_MCA_btl=self,vader,tcp on_n1 timeout 60 sbatch --parsable --no-kill --chdir "$T/job" \
  --output "$T/job/out" --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 --time 10 \
  "$src/examples/slurm/train_gpt.sbatch" "$T/config.json" --metrics "$T/job/m.jsonl") ||
  fail "sbatch failed"
step2() { local s; s=$(cat "$T/job/strata-logs/$job/progress/rank_00002.progress" 2>/dev/null) || s=-1; echo "${s#done }"; }
for _ in $(seq 1 1200); do (($(step2) >= 5)) && break; sleep 0.1; done
(($(step2) >= 5)) || fail "rank 2 (n2) did not reach step 5"
echo "node n2 taken away at step $(step2): link down, slurmd and the ranks on it frozen"
taken_ns=$(date +%s%N)
ip -n strata-n2 link set eth0 down
kill -STOP $(ip netns pids strata-n2)
for _ in $(seq 1 600); do
  on_n1 squeue -h -t PD,R -j "$job" 2>/dev/null | grep -q . || break
  sleep 0.2
done
on_n1 squeue -h -t PD,R -j "$job" 2>/dev/null | grep -q . && { on_n1 scancel "$job"; fail "the job did not end within 120 s"; }
echo "the job ended (its batch script; Slurm keeps it COMPLETING until n2 answers) $(( ($(date +%s%N) - taken_ns) / 1000000 )) ms after n2 was taken away"
grep "strata run:" "$T/job/out" | sed 's/^/  /'
grep -q "resizing 2 -> 1 node (n1): 4 -> 2 ranks, dp 4 -> 2, gradient accumulation 1 -> 2, global batch 16 kept: node n2 did not answer" "$T/job/out" ||
  fail "no shrink to n1"
grep -q "finished after 1 restart" "$T/job/out" || fail "the job did not finish on n1"
losses() { sed -n 's/.*"loss":\([^,]*\),.*"step":\([0-9]*\),.*/\2 \1/p' "$1" | awk '{l[$1] = $2} END {for (s in l) print s, l[s]}' | sort -n; }
losses "$T/ref/m.jsonl" >"$T/la"
losses "$T/job/m.jsonl" >"$T/lb"
[[ $(wc -l <"$T/lb") == "$steps" ]] || fail "the job logged $(wc -l <"$T/lb") steps, not $steps"
join "$T/la" "$T/lb" | awk '
  { d = $2 - $3; if (d < 0) d = -d; r = d / $2; if (r > worst) worst = r
    if (r > 1e-5) { print "step " $1 ": Slurm job " $3 " vs one process " $2; bad = 1 } }
  END { printf "losses: %d steps, largest relative difference %.3g\n", NR, worst; exit bad }' ||
  fail "the job's losses differ from the one-process run's"
echo "ok: Slurm job with --nodes 1:2 went on on n1 after n2 was taken away"
