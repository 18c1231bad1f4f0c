#!/usr/bin/env bash
# A checkpoint directory on a file system that fills up, with the real train_gpt on a tiny model:
# the first checkpoint fits, the second does not. On 1 and 2 ranks, with synchronous and
# background saves: one line per rank naming the directory and the bytes needed, exit status 3 (a
# failure that is not the input's), no crash on any rank (HDF5 1.10 used to segfault at exit),
# no temporary files left, the earlier checkpoint intact and verifiable, and `strata run` naming
# the disk in its summary, not a signal. The file system is a tmpfs or a loop-mounted ext4 image
# made here; where mounting is not permitted the test is skipped (exit 77).
# usage: full_disk.sh tmpfs|ext4 STRATA TRAIN_GPT MPIEXEC ARGS...
set -u
here=$(cd "$(dirname "$0")" && pwd)
# Background saves at normal priority: on a busy machine a nice-19 writer waits its turn for
# seconds, and this test is about the protocol, not the priority.
export STRATA_CHECKPOINT_WRITER_PRIORITY=normal
kind=$1
strata=$2
train_gpt=$3
shift 3
mpiexec=("$@")
T=$(mktemp -d)
mnt="$T/mnt"
mkdir -p "$mnt"
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  rm -rf "$T"
}
trap cleanup EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL ($kind${case:+, $case}): $*"
  for f in "$T"/out "$T"/err; do [[ -f "$f" ]] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}

case $kind in
  tmpfs) mount -t tmpfs -o size=8m tmpfs "$mnt" 2>"$T/why" || skip "cannot mount a tmpfs: $(cat "$T/why")" ;;
  ext4)
    command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is not installed"
    truncate -s 16M "$T/image" && mkfs.ext4 -q -F "$T/image" >/dev/null 2>&1 || skip "mkfs.ext4 failed"
    mount -o loop "$T/image" "$mnt" 2>"$T/why" || skip "cannot loop-mount an ext4 image: $(cat "$T/why")" ;;
  *) echo "unknown file system $kind"; exit 99 ;;
esac

source "$here/tiny_job.sh"
tiny_data "$strata" "$T" || fail "data prepare failed"
config() {  # config ASYNC STAGE
  tiny_config "$T/config.json" "$T/tiny.train.tok" 8 4 "$2" "$1" 32
}
free_kib() { df -k --output=avail "$mnt" | tail -n 1 | tr -d ' '; }
# Leaves KIB KiB free on the file system (a filler file takes the rest).
leave_free() {
  rm -f "$mnt/filler"
  sync
  local extra=$(( $(free_kib) - $1 ))
  (( extra > 0 )) || fail "the file system is too small"
  fallocate -l "${extra}KiB" "$mnt/filler" 2>/dev/null ||
    dd if=/dev/zero of="$mnt/filler" bs=1K count="$extra" status=none
}
launch() {  # launch RANKS ARGS...: train_gpt (with mpirun for 2 ranks); sets rc
  local n=$1
  shift
  if (( n == 1 )); then
    OMP_NUM_THREADS=1 "$@" >"$T/out" 2>"$T/err"
  else
    OMP_NUM_THREADS=1 "${mpiexec[@]}" -np "$n" "$@" >"$T/out" 2>"$T/err"
  fi
  rc=$?
}
# Open MPI's own banner lines (not the ranks').
not_mpirun() {
  grep -v -e '^-*$' -e '^Primary job' -e '^a non-zero exit code' -e '^mpirun detected' \
    -e '^the job to be terminated' -e '^ *Process name:' -e '^ *Exit code:' -e '^$' "$1"
}

for ranks in 1 2; do
  for mode in false true; do
    case="$ranks rank(s), async $mode"
    config $mode $(( ranks - 1 ))
    # One checkpoint's size here, measured on this file system (no limit).
    rm -rf "$mnt/ck" "$mnt/filler"
    launch $ranks "$train_gpt" --config "$T/config.json" --checkpoint-dir "$mnt/ck" --threads 1 \
      --set strata.train_steps=4
    [[ $rc == 0 ]] || fail "the sizing run failed ($rc)"
    one=$(du -sk "$mnt/ck/step_00000004" | cut -f1)
    rm -rf "$mnt/ck"
    leave_free $(( one * 3 / 2 ))  # room for one checkpoint, not two

    launch $ranks "$train_gpt" --config "$T/config.json" --checkpoint-dir "$mnt/ck" --threads 1
    [[ $rc == 3 ]] || fail "exit status $rc, expected 3"
    grep -Eqi 'segmentation|signal|HDF5-DIAG|#00[0-9]:|internal error' "$T/err" &&
      fail "a crash or an HDF5 error stack instead of one line"
    lines=$(not_mpirun "$T/err")
    [[ $(wc -l <<<"$lines") == "$ranks" ]] || fail "not one error line per rank: $lines"
    grep -Evq "^train_gpt: \[checkpoint\] (\(rank [0-9]\) )?no space left on the file system of '$mnt/ck/step_00000008' for 'rank_0000[01]\.h5': it needs [0-9.]+ [KM]iB \([0-9]+ bytes\), [0-9.]+ (B|KiB|MiB) are free; free some space there or write somewhere else$" <<<"$lines" &&
      fail "an error line does not name the directory and the bytes: $lines"
    find "$mnt/ck" -name '*.tmp' | grep -q . && fail "temporary files left: $(find "$mnt/ck" -name '*.tmp')"
    [[ $(cat "$mnt/ck/latest") == step_00000004 ]] || fail "latest does not name step 4"
    "$strata" ckpt verify "$mnt/ck" >"$T/out" 2>"$T/err" || fail "step 4 does not verify"
    grep -q "^ok .*step_00000004" "$T/out" || fail "step 4 not verified"

    # strata run: the summary names the disk.
    rm -rf "$mnt/ck"
    leave_free $(( one * 3 / 2 ))
    "$strata" run -n $ranks --max-restarts 0 --log-dir "$T/logs" -- "$train_gpt" --config "$T/config.json" \
      --checkpoint-dir "$mnt/ck" --threads 1 >"$T/out" 2>"$T/err"
    rc=$?
    [[ $rc == 4 ]] || fail "strata run: exit status $rc, expected 4"
    grep -q "signal" "$T/err" && fail "strata run blames a signal"
    grep -Eq "^  attempt 1: failed after .* exited with status 3 after step [0-9]+: train_gpt: \[checkpoint\] .*no space left on the file system of '$mnt/ck/step_00000008'" "$T/err" ||
      fail "strata run's summary does not name the disk"
    echo "ok: $case"
  done
done
echo "ok: full $kind file system: clean errors naming the directory and the bytes, earlier checkpoints intact"
