#!/usr/bin/env bash
# The save protocol under faults, with the real train_gpt on a tiny model: the process is killed
# (SIGKILL, as a lost node would be: STRATA_CHECKPOINT_FAULT, framework/checkpoint/fault_point.hpp)
# at every step of the protocol — before its rank file, with the file under its temporary name,
# after it (between the ranks' files), before the manifest, with the manifest under its temporary
# name, after it, after `latest` — during the first save and during a later one. The same command
# run again must resume from the newest committed checkpoint (or start fresh when there is none)
# and end with checkpoints bitwise equal to an uninterrupted run's.
# usage: save_faults.sh STRATA TRAIN_GPT RANKS sync|async [MPIEXEC ARGS...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
# Background saves at normal priority: on a busy machine a nice-19 writer waits its turn for
# seconds, and this test is about the protocol, not the priority.
export STRATA_CHECKPOINT_WRITER_PRIORITY=normal
strata=$1
train_gpt=$2
ranks=$3
mode=$4
shift 4
mpiexec=("$@")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() {
  echo "FAIL ($ranks rank(s), $mode): $*"
  for f in "$T"/case/out* "$T"/case/err*; do
    [[ -f "$f" ]] && { echo "--- $f"; tail -n 25 "$f"; }
  done
  exit 1
}

source "$here/tiny_job.sh"
tiny_data "$strata" "$T" || fail "data prepare failed"
[[ $mode == async ]] && async=true || async=false
tiny_config "$T/config.json" "$T/tiny.train.tok" 6 2 $(( ranks > 1 ? 1 : 0 )) $async

# train DIR [ENV=VALUE...]: train_gpt in DIR (checkpoints in DIR/ck); sets rc.
train() {
  local dir=$1
  shift
  { (cd "$dir" && env "$@" OMP_NUM_THREADS=1 ${mpiexec[@]+"${mpiexec[@]}"} "$train_gpt" \
    --config "$T/config.json" --checkpoint-dir ck --threads 1 >>out 2>>err); } 2>/dev/null
  rc=$?  # (the shell's "Killed" notice went to /dev/null)
}
# What a checkpoint root's newest checkpoint holds: step, state and every slice's checksum.
fingerprint() {
  "$strata" ckpt inspect --slices "$1" | grep -v -e '^checkpoint ' -e '^written '
}

mkdir -p "$T/ref"
train "$T/ref"
[[ $rc == 0 ]] || { cat "$T/ref/err"; fail "the uninterrupted run failed ($rc)"; }
want=$(fingerprint "$T/ref/ck") || fail "cannot inspect the reference checkpoint"

cases=0
for save in 2 4; do
  for point in before_rank_file rank_file_tmp after_rank_file before_manifest manifest_tmp \
      after_manifest after_latest; do
    # The rank files' points on the last rank (the other ranks' files may be complete: the
    # fault falls between the ranks' files), the commit's on rank 0 (the only one that commits).
    case $point in *rank_file*) victim=$(( ranks - 1 )) ;; *) victim=0 ;; esac
    rm -rf "$T/case"
    mkdir -p "$T/case"
    # (mpirun kills the other ranks at once, as after a lost node, instead of waiting for them
    # to act on SIGTERM)
    train "$T/case" STRATA_CHECKPOINT_FAULT="$point@$save@$victim" OMPI_MCA_odls_base_sigkill_timeout=0
    [[ $rc != 0 ]] || fail "$point@$save: the run was not killed"
    step_dir="$T/case/ck/$(printf step_%08d "$save")"
    case $point in
      after_manifest|after_latest) committed=$save ;;
      *) committed=$(( save - 2 )) ;;
    esac
    [[ -d $step_dir ]] || fail "$point@$save: no $step_dir: the kill came before the save"
    if (( committed == save )); then
      [[ -f $step_dir/manifest.json ]] || fail "$point@$save: no manifest"
    else
      [[ -f $step_dir/manifest.json ]] && fail "$point@$save: a manifest before the commit"
    fi
    if [[ $point == after_latest ]]; then
      [[ $(cat "$T/case/ck/latest") == $(basename "$step_dir") ]] || fail "$point@$save: latest not moved"
    elif [[ $point == after_manifest && $save == 4 ]]; then
      [[ $(cat "$T/case/ck/latest") == step_00000002 ]] || fail "$point@$save: latest moved early"
    fi
    mv "$T/case/out" "$T/case/out1"
    mv "$T/case/err" "$T/case/err1"
    train "$T/case"
    mv "$T/case/out" "$T/case/out2"
    mv "$T/case/err" "$T/case/err2"
    [[ $rc == 0 ]] || fail "$point@$save: the restarted run failed ($rc)"
    if (( committed > 0 )); then
      grep -q "resumed from ck/$(printf step_%08d "$committed"):" "$T/case/out2" ||
        fail "$point@$save: did not resume from step $committed"
    else
      grep -q "checkpoints: none under ck yet; starting fresh" "$T/case/out2" ||
        fail "$point@$save: did not start fresh"
    fi
    got=$(fingerprint "$T/case/ck") || fail "$point@$save: cannot inspect the final checkpoint"
    [[ "$got" == "$want" ]] || fail "$point@$save: the final checkpoint differs from the uninterrupted run's:
$(diff <(echo "$want") <(echo "$got") | head -20)"
    cases=$(( cases + 1 ))
  done
done
echo "ok: $cases faults ($ranks rank(s), $mode saves): each run resumed from the newest committed checkpoint and ended bitwise equal"
