#!/usr/bin/env bash
# Fault-injection tests of `strata run` with fake_rank (see fake_rank.cpp): ranks killed at
# random steps, a stopped rank and the watchdog, a kill during a checkpoint write, restarts used
# up, graceful and forced stops, -n 1 without mpirun.
# usage: faults.sh SCENARIO STRATA FAKE_RANK     (FAULTS_SEED=n repeats a random run)
set -u
scenario=$1
strata=$2
fake=$3
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
  echo "FAIL ($scenario, FAULTS_SEED=$seed): $*"
  for f in "$T"/out "$T"/err "$T"/logs/rank_*.log; do
    [[ -f "$f" ]] && { echo "--- $f"; tail -n 40 "$f"; }
  done
  exit 1
}

# wait_until SECONDS COMMAND...: polls COMMAND every 50 ms.
wait_until() {
  local limit=$1
  shift
  local end=$(( $(date +%s%N) + limit * 1000000000 ))
  until "$@"; do
    (( $(date +%s%N) < end )) || return 1
    sleep 0.05
  done
}

# The pid of RANK's program in ATTEMPT (from fake_rank's pid file), or nothing.
pid_of() {
  local f="$T/pids/rank_$1.pid"
  [[ -f "$f" ]] || return 1
  local a p
  read -r a p <"$f" || return 1
  [[ "$a" == "$2" ]] && echo "$p"
}
started() { pid_of "$1" "$2" >/dev/null; }
# The last step RANK reported in the current attempt (-1 if none).
step_of() {
  local s
  s=$(cat "$T/logs/progress/rank_$(printf %05d "$1").progress" 2>/dev/null) || { echo -1; return; }
  echo "${s#done }"
}
reached() { (( $(step_of "$1") >= $2 )); }

# reference N STEPS: the final state of an uninterrupted run.
reference() {
  "$strata" run -n "$1" --log-dir "$T/ref_logs" -- "$fake" --steps "$2" --ckpt "$T/ref_ck" \
    >"$T/ref_out" 2>"$T/ref_err" || fail "the reference run failed: $(cat "$T/ref_err")"
  grep -o 'final state .*' "$T/ref_out" || fail "the reference run printed no final state"
}

# start ARGS...: `strata run ARGS` in the background, output to $T/out and $T/err.
start() {
  mkdir -p "$T/pids"
  FAKE_RANK_PID_DIR="$T/pids" "$strata" run --log-dir "$T/logs" "$@" >"$T/out" 2>"$T/err" &
  launcher=$!
}
finish() {  # waits for the launcher; sets rc
  wait "$launcher"
  rc=$?
  launcher=""
}
final_state() { grep -o 'final state .*' "$T/out" | sed 's/^\[0\] //'; }

echo "scenario $scenario, FAULTS_SEED=$seed"
case "$scenario" in

kill_ranks)  # kill -9 a random rank at a random step, three times in one run
  n=3 steps=60
  want=$(reference $n $steps)
  start -n $n --max-restarts 5 --restart-delay 0.2 -- "$fake" --steps $steps --ckpt "$T/ck" --step-ms 40
  killed=()
  for attempt in 1 2 3; do
    victim=$(( RANDOM % n ))
    wait_until 60 started $victim $attempt || fail "attempt $attempt did not start"
    wait_until 30 reached $victim 0 || fail "rank $victim made no progress in attempt $attempt"
    target=$(( $(step_of $victim) + 1 + RANDOM % 8 ))
    wait_until 30 reached $victim $target || fail "rank $victim did not reach step $target"
    pid=$(pid_of $victim $attempt)
    echo "attempt $attempt: kill -9 rank $victim (pid $pid) at step $(step_of $victim)"
    kill -KILL "$pid"
    killed+=("$victim")
  done
  finish
  [[ $rc == 0 ]] || fail "exit status $rc, expected 0"
  got=$(final_state)
  [[ "$got" == "$want" ]] || fail "final state '$got' differs from the uninterrupted run's '$want'"
  for i in 0 1 2; do
    grep -Eq "attempt $((i + 1)): failed after .*rank ${killed[$i]} killed by signal 9 \(SIGKILL" "$T/err" ||
      fail "the summary does not name rank ${killed[$i]} killed in attempt $((i + 1))"
  done
  grep -q "finished after 3 restarts" "$T/err" || fail "no 'finished after 3 restarts'"
  ;;

watchdog)  # SIGSTOP one rank: the watchdog kills and restarts the job, which then completes
  n=2 steps=50 wd=2
  want=$(reference $n $steps)
  start -n $n --watchdog $wd --max-restarts 2 --restart-delay 0.2 -- \
    "$fake" --steps $steps --ckpt "$T/ck" --step-ms 40
  victim=$(( RANDOM % n ))
  wait_until 60 started $victim 1 || fail "attempt 1 did not start"
  wait_until 30 reached $victim $(( 3 + RANDOM % 5 )) || fail "no progress in attempt 1"
  pid=$(pid_of $victim 1)
  kill -STOP "$pid"
  stopped_at=$(date +%s)
  echo "SIGSTOP rank $victim (pid $pid) at step $(step_of $victim)"
  wait_until $(( wd + 15 )) started $victim 2 || fail "no restart within the watchdog's $wd s + 15 s"
  echo "restarted $(( $(date +%s) - stopped_at )) s after the stop"
  kill -0 "$pid" 2>/dev/null && fail "the stopped rank (pid $pid) is still alive"
  finish
  [[ $rc == 0 ]] || fail "exit status $rc, expected 0"
  [[ "$(final_state)" == "$want" ]] || fail "final state '$(final_state)' != '$want'"
  grep -q "attempt 1: failed after .*watchdog: no rank made progress for $wd s" "$T/err" ||
    fail "the summary does not name the watchdog"
  ;;

kill_during_save)  # a rank dies between writing its checkpoint file and renaming it
  n=2 steps=30
  want=$(reference $n $steps)
  FAKE_RANK_SLOW_SAVE_STEP=10 FAKE_RANK_SLOW_SAVE_RANK=1 FAKE_RANK_SLOW_SAVE_MS=30000 \
    start -n $n --max-restarts 1 --restart-delay 0.2 -- "$fake" --steps $steps --ckpt "$T/ck" --step-ms 20
  wait_until 60 test -f "$T/pids/rank_1.saving" || fail "rank 1 never started saving step 10"
  # Rank 0 saves step 10 at the same time, on its own: on a loaded machine it may not be done yet.
  wait_until 20 test -f "$T/ck/step_00000010/rank_00000.state" ||
    fail "rank 0 did not write its step-10 file"
  kill -KILL "$(pid_of 1 1)"
  [[ -f "$T/ck/step_00000010/rank_00001.state.tmp" ]] || fail "rank 1 left no temporary file"
  [[ "$(cat "$T/ck/latest")" == step_00000005 ]] || fail "latest moved before every rank saved"
  finish
  [[ $rc == 0 ]] || fail "exit status $rc, expected 0"
  grep -q "^\[0\] rank 0 resumed from step 5$" "$T/out" ||
    fail "attempt 2 did not resume from step 5, the newest complete checkpoint"
  [[ "$(final_state)" == "$want" ]] || fail "final state '$(final_state)' != '$want'"
  ;;

gave_up)  # a rank that fails every attempt: non-zero exit and a summary naming each failure
  FAKE_RANK_FAIL_STEP=3 FAKE_RANK_FAIL_RANK=1 \
    start -n 2 --max-restarts 2 --restart-delay 0 -- "$fake" --steps 10 --ckpt "$T/ck"
  finish
  [[ $rc == 4 ]] || fail "exit status $rc, expected 4 (restarts used up)"
  grep -q "giving up: the job failed 3 times (--max-restarts 2)" "$T/err" || fail "no 'giving up' line"
  for a in 1 2 3; do
    grep -Eq "^  attempt $a: failed after [0-9.]+ s: rank 1 exited with status 3 after step 3: rank 1 failing on purpose after step 3$" "$T/err" ||
      fail "the summary does not name attempt $a's failure and rank 1's last words"
  done
  # Console: rank 0's stdout and every rank's stderr, prefixed (a failed rank's last words once
  # per attempt, by the launcher); logs: everything per rank.
  [[ $(grep -c "^\[1\] rank 1 failing on purpose after step 3$" "$T/err") == 3 ]] ||
    fail "rank 1's error is not on the console once per attempt"
  grep -q "^\[0\] rank 0 step 2$" "$T/out" || fail "rank 0's output is not on the console"
  grep -q "rank 1 step" "$T/out" && fail "rank 1's stdout reached the console"
  [[ $(grep -c "^rank 1 step 2$" "$T/logs/rank_00001.log") == 3 ]] || fail "rank_00001.log lacks an attempt's output"
  [[ $(grep -c "===== strata run: attempt" "$T/logs/rank_00000.log") == 3 ]] || fail "rank_00000.log lacks attempt headers"
  # A rank killed by a signal, without restarts.
  rm -rf "$T/ck"
  FAKE_RANK_FAIL_STEP=2 FAKE_RANK_FAIL_RANK=0 FAKE_RANK_FAIL_HOW=segv \
    start -n 2 --max-restarts 0 -- "$fake" --steps 10 --ckpt "$T/ck"
  finish
  [[ $rc == 4 ]] || fail "segv: exit status $rc, expected 4"
  grep -Eq "^  attempt 1: failed after .* s: rank 0 killed by signal 11 \(SIGSEGV" "$T/err" || fail "segv not named"
  ;;

graceful_stop)  # SIGINT: ranks save and exit 0; the same command then resumes and completes
  n=2 steps=200
  want=$(reference $n $steps)
  start -n $n -- "$fake" --steps $steps --ckpt "$T/ck" --step-ms 40
  wait_until 60 reached 0 $(( 3 + RANDOM % 10 )) || fail "no progress"
  kill -INT "$launcher"
  finish
  [[ $rc == 5 ]] || fail "exit status $rc, expected 5 (stopped cleanly)"
  stop=$(sed -n 's/^\[0\] rank 0 stopped at step \([0-9]*\) after SIGTERM.*/\1/p' "$T/out")
  [[ -n "$stop" ]] || fail "rank 0 did not report a save on SIGTERM"
  grep -q "rank 1 stopped at step $stop after SIGTERM" "$T/logs/rank_00001.log" || fail "rank 1 did not stop at step $stop"
  [[ "$(cat "$T/ck/latest")" == "$(printf step_%08d "$stop")" ]] || fail "latest is not step $stop"
  start -n $n -- "$fake" --steps $steps --ckpt "$T/ck" --step-ms 1
  finish
  [[ $rc == 0 ]] || fail "the resumed run: exit status $rc"
  grep -q "^\[0\] rank 0 resumed from step $stop$" "$T/out" || fail "the second run did not resume from step $stop"
  [[ "$(final_state)" == "$want" ]] || fail "final state '$(final_state)' != '$want'"
  ;;

forced_stop)  # ranks that ignore SIGTERM: the second SIGINT kills them at once
  FAKE_RANK_IGNORE_TERM=1 start -n 2 -- "$fake" --steps 100000 --ckpt "$T/ck" --step-ms 20
  wait_until 60 reached 1 2 || fail "no progress"
  pids="$(pid_of 0 1) $(pid_of 1 1)"
  kill -INT "$launcher"
  sleep 1
  kill -0 $pids 2>/dev/null || fail "the ranks ended on the first SIGINT although they ignore SIGTERM"
  kill -INT "$launcher"
  finish
  [[ $rc == 6 ]] || fail "exit status $rc, expected 6 (stopped, ranks killed)"
  for p in $pids; do kill -0 "$p" 2>/dev/null && fail "rank pid $p survived"; done
  grep -q "killing the job" "$T/err" || fail "no 'killing the job'"
  ;;

direct)  # -n 1 runs without mpirun; a killed rank is restarted there too
  steps=40
  want=$(reference 1 $steps)
  "$strata" run -n 1 --dry-run -- "$fake" --steps 1 --ckpt "$T/x" | grep -q mpirun && fail "-n 1 uses mpirun"
  start -n 1 --restart-delay 0 -- "$fake" --steps $steps --ckpt "$T/ck" --step-ms 40
  wait_until 60 reached 0 $(( 3 + RANDOM % 10 )) || fail "no progress"
  kill -KILL "$(pid_of 0 1)"
  finish
  [[ $rc == 0 ]] || fail "exit status $rc, expected 0"
  grep -q "1 rank without mpirun" "$T/err" || fail "not run directly"
  grep -q "attempt 1: failed after .*rank 0 killed by signal 9" "$T/err" || fail "the kill is not named"
  [[ "$(final_state)" == "$want" ]] || fail "final state '$(final_state)' != '$want'"
  ;;

stuck_after_failure)  # a rank failed but mpirun leaves the others running: --kill-grace ends it
  # (mpirun waits odls_base_sigkill_timeout before SIGKILL; the ranks ignore SIGTERM)
  OMPI_MCA_odls_base_sigkill_timeout=600 start -n 2 --max-restarts 0 --kill-grace 2 -- sh -c \
    'trap "" TERM; echo $$ >"$0/rank_$OMPI_COMM_WORLD_RANK.pid"; [ $OMPI_COMM_WORLD_RANK = 1 ] && exit 3; exec sleep 300' \
    "$T/pids"
  finish
  [[ $rc == 4 ]] || fail "exit status $rc, expected 4"
  grep -q "a rank failed and the job did not end within 2 s; killing it" "$T/err" || fail "no kill after the grace period"
  grep -Eq "^  attempt 1: failed after .* s: rank 1 exited with status 3" "$T/err" || fail "the failure is not named"
  p=$(cat "$T/pids/rank_0.pid")
  kill -0 "$p" 2>/dev/null && fail "rank 0 (pid $p) survived"
  ;;

daemons_clean_up)  # what outlives mpirun gets --kill-grace to end by itself before SIGKILL
  # Open MPI's daemons (orted) delete the job's session directory and shared-memory segments once
  # mpirun is gone; the launcher used to SIGKILL them at once, which left those behind on every
  # node after every failed attempt (found by the chaos soak, cluster/chaos). A stand-in mpirun
  # leaves one daemon that cleans up 0.3 s after it ended and one that never ends.
  cat >"$T/mpirun" <<'SH'
#!/usr/bin/env bash
touch "$SESSION"
parent=$$
( while kill -0 $parent 2>/dev/null; do sleep 0.05; done; sleep 0.3; rm -f "$SESSION" ) </dev/null >/dev/null 2>&1 &
( trap '' TERM; echo $BASHPID >"$STUCK"; exec sleep 300 ) </dev/null >/dev/null 2>&1 &
sleep 0.3
exit 3
SH
  chmod +x "$T/mpirun"
  SESSION="$T/session" STUCK="$T/stuck.pid" start -n 2 --max-restarts 0 --kill-grace 2 \
    --mpirun "$T/mpirun" -- "$fake" --steps 10 --ckpt "$T/ck"
  t0=$(date +%s%N)
  finish
  [[ $rc == 4 ]] || fail "exit status $rc, expected 4"
  [[ -e "$T/session" ]] && fail "the daemon was killed before it cleaned up (its session file is left)"
  p=$(cat "$T/stuck.pid")
  kill -0 "$p" 2>/dev/null && fail "the daemon that never ends (pid $p) survived"
  (( ($(date +%s%N) - t0) / 1000000 < 9000 )) || fail "the launcher waited more than the grace period"
  ;;

no_restart)  # bad input (1) and out of memory (7) are not restarted; their error is shown once
  FAKE_RANK_FAIL_STEP=2 FAKE_RANK_FAIL_RANK=-1 FAKE_RANK_FAIL_STATUS=1 \
    start -n 2 --max-restarts 3 --restart-delay 0 -- "$fake" --steps 10 --ckpt "$T/ck"
  finish
  [[ $rc == 1 ]] || fail "bad input: exit status $rc, expected 1 (the rank's)"
  grep -q "attempt 2" "$T/err" && fail "bad input was restarted"
  [[ $(grep -c "failing on purpose" "$T/err") == 1 ]] || fail "the error is not on the console exactly once"
  grep -q "^\[0,1\] every rank failing on purpose after step 2$" "$T/err" || fail "the error does not name both ranks"
  grep -Eq "not restarting: rank [01] exited with status 1 \(bad input\), which a restart cannot change" "$T/err" ||
    fail "no 'not restarting' line"
  rm -rf "$T/ck"
  FAKE_RANK_FAIL_STEP=2 FAKE_RANK_FAIL_RANK=1 FAKE_RANK_FAIL_STATUS=7 \
    start -n 2 --max-restarts 3 --restart-delay 0 -- "$fake" --steps 10 --ckpt "$T/ck"
  finish
  [[ $rc == 7 ]] || fail "out of memory: exit status $rc, expected 7"
  grep -q "attempt 2" "$T/err" && fail "out of memory was restarted"
  grep -q "not restarting: rank 1 exited with status 7 (out of memory)" "$T/err" || fail "no 'not restarting' line for 7"
  # --always-restart: restarted like any failure
  rm -rf "$T/ck"
  FAKE_RANK_FAIL_STEP=2 FAKE_RANK_FAIL_RANK=1 FAKE_RANK_FAIL_STATUS=1 \
    start -n 2 --max-restarts 1 --restart-delay 0 --always-restart -- "$fake" --steps 10 --ckpt "$T/ck"
  finish
  [[ $rc == 4 ]] || fail "--always-restart: exit status $rc, expected 4"
  grep -q "attempt 2 failed" "$T/err" || fail "--always-restart did not restart"
  ;;

dry_run)  # the mpirun command: run-as-root variables only as root, exported variables
  # Without the caller's own STRATA_* variables (strata run exports every one: a STRATA_JOBS in the
  # environment once came between STRATA_FOO and BAR).
  unset_strata=()
  for v in $(compgen -e | grep '^STRATA_'); do unset_strata+=(-u "$v"); done
  out=$(cd "$T" && env "${unset_strata[@]}" STRATA_FOO=1 BAR=2 "$strata" run -n 2 -x BAR --dry-run -- "$fake") \
    || fail "dry run failed"
  echo "$out"
  grep -q -- "-x STRATA_FOO -x BAR " <<<"$out" || fail "STRATA_FOO and BAR are not exported"
  if [[ $EUID == 0 ]]; then
    grep -q "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun" <<<"$out" || fail "no run-as-root variables"
  else
    grep -q OMPI_ALLOW_RUN_AS_ROOT <<<"$out" && fail "run-as-root variables for a normal user"
  fi
  [[ -e "$T/strata-logs" ]] && fail "a dry run created files"
  ;;

*) echo "unknown scenario $scenario"; exit 99 ;;
esac
echo "ok: $scenario"
