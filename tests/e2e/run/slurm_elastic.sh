#!/usr/bin/env bash
# Elastic restarts inside a real Slurm allocation (cluster/slurm on two cluster/netns nodes): sbatch
# --no-kill of examples/slurm/train_gpt.sbatch on 2 nodes x 2 tasks with `strata run --nodes 1:2`
# (from the allocation: no host list), global batch 16 (dp 4, micro-batch 4). By MODE:
#   shrink  node n2 is taken away mid-run: its link goes down and every process on it (slurmd, the
#           ranks) is frozen. The watchdog ends the hung attempt, n2 does not answer the probe
#           (mpirun starts its daemon there through srun, which cannot reach n2's slurmd), and the
#           job goes on on n1 (dp 2, accumulation 2) to the end.
#   grow    node n2 crashes mid-run (every process on it killed) and the job goes on on n1; then
#           Slurm marks n2 DOWN (what slurmctld does after SlurmdTimeout, 300 s, done with scontrol
#           as soon as the job runs on n1) and removes it from the --no-kill job. n2 returns
#           (slurmd started again; back in service by itself with cluster/slurm's
#           ReturnToService=2, else `scontrol update State=RESUME`): it is idle but no longer the job's, so srun
#           there, and the launcher's probe, are refused ("Requested node configuration is not
#           available") and the job stays on n1. Slurm's job expansion gives n2 back to the job
#           (`salloc --dependency=expand:JOB`, then `scontrol update JobId=NEW NumNodes=0`;
#           slurm.conf's SchedulerParameters=permit_job_expansion), the next probe answers, and the
#           job grows back to both nodes (dp 4) at the next step and finishes there.
#   wait    as shrink, with --nodes 2:2: the launcher waits --node-grace for n2, then gives up
#           naming it and --nodes 2:2 (strata run's exit status 4; the batch script's).
#   return  as shrink, then n2 comes back before Slurm marked it DOWN (link up, its processes go
#           on): it never left the allocation, the probe answers again and the job grows back to
#           both nodes. Not in ctest (the suite's time): run it by hand.
# Every step's loss is within 1e-5 relative of a one-process run of the same global batch, and the
# final export's parameters within 1e-5 relative L2 of that run's (compare_exports). ctest
# run_slurm_elastic_shrink and _grow (label multinode). Needs root, namespaces, slurm-wlm and munge: otherwise
# it exits 77 (skipped). (--time 10: the script asks for SIGTERM 300 s before the limit, which a
# 5-minute job gets at once.) usage: slurm_elastic.sh MODE STRATA TRAIN_GPT SOURCE_DIR
set -u
mode=$1 strata=$2 train_gpt=$3 src=$4
[[ $mode == shrink || $mode == grow || $mode == wait || $mode == return ]] || { echo "usage: slurm_elastic.sh shrink|grow|wait|return STRATA TRAIN_GPT SOURCE_DIR" >&2; exit 2; }
. "$(dirname "$0")/elastic_lib.sh"
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
holder=""
cleanup() {
  [[ -n $holder ]] && kill "$holder" 2>/dev/null
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
# grow: mpirun notices the crash (its daemon on n2 is gone; 7 to 21 s here, by load), the watchdog
# only backs it up; a longer one lets hold_until_growing hold n1's ranks longer at a time.
watchdog=3 hold_s=1
# Slurm's part (the node set DOWN, slurmd started again, the refused srun, the probe, the
# expansion) outlasted 26 held rounds of 2 s (a step between) on 2 cores under a full ctest run,
# and the job reached its last step before n2 came back; 4 s rounds hold it twice as long. (More
# steps instead drift past the export's 1e-5: 3e-5 after 56.) The watchdog allows a round and a
# slow step.
[[ $mode == grow ]] && watchdog=8 hold_s=4
[[ $mode == grow || $mode == return ]] && steps=32  # room for growing back before the end
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
range=1:2
[[ $mode == wait ]] && range=2:2
if [[ $mode != wait ]]; then  # the reference (wait ends without training to the end)
  (cd "$T/ref" && OMP_NUM_THREADS=1 "$train_gpt" --config "$T/config.json" --checkpoint-dir ck \
    --threads 1 --metrics m.jsonl >out 2>&1) || fail "the one-process run failed"
fi
job=$(cd "$T/job" && STRATA=$strata TRAIN_GPT=$train_gpt STRATA_CKPT_DIR=$T/job/ck \
  STRATA_RUN_ARGS="--nodes $range --node-grace 2 --watchdog $watchdog --watchdog-startup 60 --restart-delay 0.5 --kill-grace 1" \
  OMPI_MCA_btl=self,vader,tcp on_n1 timeout 60 sbatch --parsable --no-kill --chdir "$T/job" \
  --output "$T/job/out" --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 --time 10 \
  "$src/examples/slurm/train_gpt.sbatch" "$T/config.json" --metrics "$T/job/m.jsonl") ||
  fail "sbatch failed"
progress() { echo "$T/job/strata-logs/$job/progress"; }
step_of() { rank_step "$(progress)" "$1"; }
for _ in $(seq 1 1200); do (($(step_of 2) >= 5)) && break; sleep 0.1; done
(($(step_of 2) >= 5)) || fail "rank 2 (n2) did not reach step 5"
taken_ns=$(date +%s%N)
# The job on n1 alone, a few steps in.
wait_on_n1() {
  for _ in $(seq 1 600); do
    grep -q "attempt 2: 2 ranks on n1:2" "$T/job/out" 2>/dev/null && (($(step_of 0) >= 6)) && break
    sleep 0.1
  done
  grep -q "attempt 2: 2 ranks on n1:2" "$T/job/out" || fail "the job did not restart on n1 alone"
}
if [[ $mode == shrink || $mode == return || $mode == wait ]]; then
  echo "node n2 taken away at step $(step_of 2): link down, slurmd and the ranks on it frozen"
  ip -n strata-n2 link set eth0 down
  kill -STOP $(ip netns pids strata-n2)
  if [[ $mode == return ]]; then
    wait_on_n1
    [[ $(on_n1 squeue -h -j "$job" -o %N) == "n[1-2]" ]] || fail "n2 left job $job before SlurmdTimeout"
    echo "n2 back at step $(step_of 0), before Slurm marked it DOWN: link up, its processes go on"
    hold_until_growing n1 "$T/job/out" "$(progress)" &
    holder=$!
    ip -n strata-n2 link set eth0 up
    kill -CONT $(ip netns pids strata-n2)
    wait "$holder"
  fi
else
  echo "node n2 crashes at step $(step_of 2): every process on it killed (slurmd, the job's step, the ranks)"
  kill -KILL $(ip netns pids strata-n2)
  wait_on_n1
  hold_until_growing n1 "$T/job/out" "$(progress)" "$hold_s" &
  holder=$!
  # slurmctld marks a node that stopped answering DOWN after SlurmdTimeout (300 s), long after the
  # job went on on n1: here once it did. (Set DOWN at once, while attempt 1 was still being torn
  # down, the whole batch job ended without a word from strata run in 2 of 11 runs: not
  # understood; docs/launcher.md, "Growing back inside Slurm".)
  on_n1 scontrol update NodeName=n2 State=DOWN Reason="n2 crashed (slurm_elastic.sh)" ||
    fail "scontrol update NodeName=n2 State=DOWN failed"
  job_nodes() { on_n1 squeue -h -j "$job" -o %N 2>/dev/null; }
  for _ in $(seq 1 50); do [[ $(job_nodes) == n1 ]] && break; sleep 0.1; done
  [[ $(job_nodes) == n1 ]] || fail "Slurm did not remove the DOWN node n2 from the --no-kill job (its nodes: $(job_nodes))"
  echo "Slurm removed n2 from job $job: its nodes are now $(job_nodes)"
  echo "n2 returns at step $(step_of 0): slurmd started again"
  "$src/cluster/slurm/enter" n2 /usr/sbin/slurmd -f "$SLURM_CONF" -N n2 || fail "slurmd on n2 did not start again"
  # ReturnToService=2 (cluster/slurm/up): slurmd's registration returns the node to service; with
  # ReturnToService=1 (Slurm's default) a node set DOWN by hand stays DOWN until resumed.
  for _ in $(seq 1 30); do [[ $(on_n1 sinfo -h -n n2 -o %T) == idle ]] && break; sleep 0.1; done
  if [[ $(on_n1 sinfo -h -n n2 -o %T) == down* ]]; then
    on_n1 scontrol update NodeName=n2 State=RESUME || fail "scontrol update NodeName=n2 State=RESUME failed"
  fi
  for _ in $(seq 1 100); do [[ $(on_n1 sinfo -h -n n2 -o %T) == idle ]] && break; sleep 0.1; done
  [[ $(on_n1 sinfo -h -n n2 -o %T) == idle ]] || fail "n2 is not idle after RESUME: $(on_n1 sinfo -h -n n2 -o %T)"
  # Back in service, but not the job's any more: srun there is refused, and so the launcher's
  # probe fails (mpirun only says its daemon failed) and the job stays on n1.
  refused=$(on_n1 timeout 20 srun --jobid="$job" --nodelist n2 --nodes 1 --ntasks 1 true 2>&1) &&
    fail "srun on n2 inside job $job worked while n2 was not in the job"
  grep -q "Requested node configuration is not available" <<<"$refused" ||
    fail "srun on n2 inside job $job: not the expected refusal: $refused"
  probe_log=$T/job/strata-logs/$job/probe/n2.log
  seen=$(stat -c %s "$probe_log" 2>/dev/null || echo 0)
  for _ in $(seq 1 100); do (($(stat -c %s "$probe_log") > seen)) && break; sleep 0.1; done
  (($(stat -c %s "$probe_log") > seen)) || fail "the launcher did not probe n2 again within 10 s"
  grep -q "growing to" "$T/job/out" && fail "the job grew onto n2 while n2 was not in its allocation"
  echo "n2 back in service (idle) but not in job $job: srun there is refused (${refused##*error: }), the launcher's probe fails, the job stays on n1"
  # Slurm's job expansion: a job on n2 that depends on expanding ours gives its node to ours.
  grant=$(on_n1 timeout 30 salloc --no-shell --dependency=expand:"$job" --nodelist n2 --nodes 1 \
    --ntasks-per-node 2 --cpus-per-task 1 2>&1)
  expand=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' <<<"$grant")
  [[ -n $expand ]] || fail "salloc --dependency=expand:$job on n2 failed: $grant"
  on_n1 scontrol update JobId="$expand" NumNodes=0 >/dev/null || fail "scontrol update JobId=$expand NumNodes=0 failed"
  on_n1 scancel "$expand"
  [[ $(job_nodes) == "n[1-2]" ]] || fail "job expansion did not give n2 back to job $job (its nodes: $(job_nodes))"
  echo "job $job expanded back onto n2 (through job $expand): its nodes are $(job_nodes)"
  wait "$holder"
fi
for _ in $(seq 1 600); do
  on_n1 squeue -h -t PD,R -j "$job" 2>/dev/null | grep -q . || break
  sleep 0.2
done
on_n1 squeue -h -t PD,R -j "$job" 2>/dev/null | grep -q . && { on_n1 scancel "$job"; fail "the job did not end within 120 s"; }
echo "the job ended $(( ($(date +%s%N) - taken_ns) / 1000000 )) ms after n2 was taken away$([[ $mode == shrink ]] && echo " (its batch script; Slurm keeps it COMPLETING until n2 answers)")"
grep "strata run:" "$T/job/out" | sed 's/^/  /'
if [[ $mode == wait ]]; then
  grep -q "giving up: 1 node can run the job (n1) and --nodes 2:2 needs at least 2; node n2 did not answer within --node-grace 2 s" "$T/job/out" ||
    fail "no clear message naming n2 and --nodes 2:2"
  grep -q "waiting up to 2 s (--node-grace) for it to come back" "$T/job/out" || fail "it did not wait for n2"
  state=$(on_n1 sacct -n -X -j "$job" -o ExitCode 2>/dev/null | tr -d ' ')
  grep -q "finished after" "$T/job/out" && fail "the job finished without n2 under --nodes 2:2"
  echo "ok: Slurm job with --nodes 2:2 waited --node-grace for n2, then gave up naming it${state:+ (exit code $state)}"
  exit 0
fi
grep -q "resizing 2 -> 1 node (n1): 4 -> 2 ranks, dp 4 -> 2, gradient accumulation 1 -> 2, global batch 16 kept: node n2 did not answer" "$T/job/out" ||
  fail "no shrink to n1"
grep -q "finished after" "$T/job/out" || fail "the job did not finish"
if [[ $mode != shrink ]]; then
  grep -q "resizing 1 -> 2 nodes (n1,n2): 2 -> 4 ranks, dp 2 -> 4, gradient accumulation 2 -> 1, global batch 16 kept: node n2 answers again" "$T/job/out" ||
    fail "no grow-back line"
  grep -q '"resize":"1 -> 2 nodes (n1,n2)' "$T/job/m.jsonl" || fail "the metrics do not mark the growth"
  [[ $(cat "$(progress)/rank_00003.progress") == "done $steps" ]] || fail "rank 3 (n2) did not finish"
  tail -n 1 "$T/job/m.jsonl" | grep -q '"data_parallel_size":4' || fail "the last step is not on dp 4"
fi
compare_losses "$T/ref/m.jsonl" "$T/job/m.jsonl" "$steps" || fail "the job's losses differ from the one-process run's"
# The final weights, exported: within 1e-5 relative L2 per parameter (compare_exports).
"$strata" ckpt export "$T/ref/ck" --output "$T/ref.h5" >/dev/null || fail "export of the one-process run failed"
"$strata" ckpt export "$T/job/ck" --output "$T/job.h5" >/dev/null || fail "export of the job failed"
compare_exports "$T/ref.h5" "$T/job.h5" || fail "the job's exported weights differ from the one-process run's"
case $mode in
  shrink) echo "ok: Slurm job with --nodes 1:2 went on on n1 after n2 was taken away" ;;
  return) echo "ok: Slurm job with --nodes 1:2 shrank to n1 while n2 was away and grew back to n1,n2 when n2 came back before Slurm marked it DOWN" ;;
  grow) echo "ok: Slurm job with --nodes 1:2 shrank to n1 when n2 crashed and grew back to n1,n2 when n2 was resumed and given back to the job" ;;
esac
