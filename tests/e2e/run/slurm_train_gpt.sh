#!/usr/bin/env bash
# A real Slurm (Debian's slurm-wlm and munge) on two "nodes" of cluster/netns: slurmctld on n1,
# slurmd on n1 and n2 (cluster/slurm/up). `sbatch` of examples/slurm/train_gpt.sbatch on 2 nodes x
# 2 tasks: `strata run` takes the hosts and ranks from the allocation (no -n, no host list), trains
# dp 4, and every step's loss is within 1e-5 relative of a one-process run of the same global
# batch (16: 4 ranks x micro-batch 4, or 1 rank x 4 accumulation steps). Then `scontrol requeue`
# of a running job: the job runs again and resumes from its last complete checkpoint.
# Needs root, network namespaces and the packages: otherwise it exits 77 (skipped) saying why.
# usage: slurm_train_gpt.sh STRATA TRAIN_GPT SOURCE_DIR
set -u
strata=$1 train_gpt=$2 src=$3
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "not root: network namespaces and slurmd need root"
for p in slurmctld slurmd munged; do
  [[ -x /usr/sbin/$p ]] || skip "/usr/sbin/$p not found (apt-get install -y slurm-wlm munge)"
done
command -v sbatch >/dev/null || skip "sbatch not found (apt-get install -y slurm-wlm)"
command -v ip >/dev/null && command -v nsenter >/dev/null || skip "no ip or nsenter command"
ip netns add strata-probe-$$ 2>/dev/null || skip "ip netns add is not allowed here"
probe_ok=1
nsenter --net=/run/netns/strata-probe-$$ unshare --mount --uts /bin/sh -c \
  'mount --bind /etc/hostname /etc/hostname && hostname probe' 2>/dev/null || probe_ok=0
mkdir -p /etc/netns 2>/dev/null && [[ -w /etc/netns ]] || probe_ok=2
ip netns del strata-probe-$$
((probe_ok == 1)) || skip "$( ((probe_ok == 0)) && echo "entering namespaces (nsenter, unshare --mount --uts) is not allowed here" || echo "/etc/netns is not writable (the nodes' hosts files go there)")"

T=$(mktemp -d)
slurm=$T/slurm
cleanup() {
  "$src/cluster/slurm/down" "$slurm" >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  on_n1 squeue 2>&1
  for f in "$T"/*/out "$T"/*/strata-logs/*/rank_*.log "$slurm"/*.log; do
    [[ -f "$f" ]] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}
"$src/cluster/slurm/up" 2 "$slurm" || fail "cluster/slurm/up 2 failed"
export SLURM_CONF=$slurm/slurm.conf
on_n1() { "$src/cluster/slurm/enter" n1 "$@"; }

for i in $(seq 1 400); do
  echo "line $i: sphinx of black quartz, judge my vow, $((i * 7 % 11)) times"
done >"$T/corpus.txt"
"$strata" data prepare --input "$T/corpus.txt" --output "$T/tiny" >/dev/null || fail "data prepare failed"
config() {  # config STEPS
  cat <<JSON
{
  "train_batch_size": 16,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "zero_optimization": {"stage": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "strata": {
    "seed": 13,
    "train_steps": $1,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "data": {"train": "$T/tiny.train.tok", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": 2}
  }
}
JSON
}
config 6 >"$T/config.json"
config 400 >"$T/long.json"  # stopped early

# submit DIR CONFIG SBATCH-ARGS...: the example job script from DIR, checkpoints in DIR/ck.
submit() {
  local dir=$1 cfg=$2
  shift 2
  mkdir -p "$dir"
  (cd "$dir" && STRATA=$strata TRAIN_GPT=$train_gpt STRATA_CKPT_DIR=$dir/ck \
    STRATA_RUN_ARGS="--restart-delay 0.5" OMPI_MCA_btl=self,vader,tcp \
    on_n1 timeout 120 sbatch --chdir "$dir" --output "$dir/out" --nodes 2 --ntasks-per-node 2 \
    --cpus-per-task 1 --time 5 "$@" "$src/examples/slurm/train_gpt.sbatch" "$cfg" \
    --metrics "$dir/m.jsonl")
}
values() { grep -o "\"$1\":[^,}]*" "$2" | cut -d: -f2; }

# One process, 4 accumulation steps: the reference.
mkdir -p "$T/ref"
(cd "$T/ref" && OMP_NUM_THREADS=1 "$train_gpt" --config "$T/config.json" --checkpoint-dir ck \
  --threads 1 --metrics m.jsonl >out 2>&1) || fail "the one-process run failed"

start=$SECONDS
submit "$T/job" "$T/config.json" --wait >/dev/null || fail "the Slurm job failed"
echo "sbatch --wait: $((SECONDS - start)) s"
grep -q "strata run: Slurm job [0-9]*: 4 ranks on n1:2,n2:2" "$T/job/out" ||
  fail "strata run did not take 4 ranks on n1:2,n2:2 from the allocation"
grep -q "dp 4 x tp 1 x pp 1" "$T/job/out" || fail "the job did not train dp 4"
a=$(values loss "$T/job/m.jsonl") b=$(values loss "$T/ref/m.jsonl")
[[ $(wc -w <<<"$a") == 6 ]] || fail "the Slurm job logged $(wc -w <<<"$a") losses, not 6"
paste <(echo "$a") <(echo "$b") | awk '
  { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $2) { print "step " NR ": Slurm job " $1 " vs one process " $2; bad = 1 } }
  END { exit bad }' || fail "the Slurm job's losses differ from the one-process run's"
echo "ok: sbatch on 2 nodes x 2 tasks = one process with the same global batch (6 losses within 1e-5)"

# scontrol requeue of a running job: Slurm ends it and starts it again (the same job id, the same
# script), and train_gpt resumes from the newest complete checkpoint. The second run is cancelled
# once it has resumed: what follows a resume is the first test's business.
job=$(submit "$T/rq" "$T/long.json" --parsable) || fail "sbatch of the requeue job failed"
step0() { local s; s=$(cat "$T/rq/strata-logs/$job/progress/rank_00000.progress" 2>/dev/null) || s=-1; echo "${s#done }"; }
for _ in $(seq 1 600); do (($(step0) >= 3)) && break; sleep 0.1; done
(($(step0) >= 3)) || fail "the requeue job did not reach step 3"
at=$(step0)
on_n1 scontrol requeue "$job" || fail "scontrol requeue $job failed"
start=$SECONDS
# Slurm holds a requeued job for two minutes (EligibleTime); here it may start at once.
for _ in $(seq 1 900); do
  grep -q "(1 requeues so far)" "$T/rq/out" && grep -q "resumed from" "$T/rq/out" && break
  on_n1 scontrol show job "$job" | grep -q "Reason=BeginTime" &&
    on_n1 scontrol update JobId="$job" StartTime=now
  sleep 0.1
done
on_n1 scancel "$job"
grep -q "(1 requeues so far)" "$T/rq/out" || fail "the job did not run again after scontrol requeue"
grep -q "resumed from .*/rq/ck/step_0*[1-9]" "$T/rq/out" || fail "the requeued job did not resume from a checkpoint"
echo "ok: scontrol requeue after step $at: the job ran again in $((SECONDS - start)) s and $(grep -o "resumed from [^:]*: step [0-9]*" "$T/rq/out" | tail -1)"
