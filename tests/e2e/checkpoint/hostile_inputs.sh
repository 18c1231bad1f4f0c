#!/usr/bin/env bash
# Hostile and mistaken inputs, each the way a user would produce it (issue #18): a job killed
# during its first save (an uncommitted step directory) starts fresh; an edited manifest is
# refused; JSON nested 100,000 deep or a 100,000-digit number is one short error; outputs are
# never written over devices or directories; unusable argument values fail at start-up; and
# every program uses the same exit statuses (docs/exit-codes.md).
# usage: hostile_inputs.sh STRATA TRAIN_GPT
set -u
here=$(cd "$(dirname "$0")" && pwd)
strata=$1
train_gpt=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  local file
  for file in "$T"/out "$T"/err; do [[ -f "$file" ]] && { echo "--- $file"; head -c 3000 "$file"; echo; }; done
  failures=$((failures + 1))
}
# expect NAME RC CMD...: runs CMD (output in $T/out, $T/err); its exit status must be RC, its
# stderr short (no echo of a huge input) and free of crashes.
expect() {
  local name=$1 want=$2
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  rc=$?
  [[ $rc == "$want" ]] || { fail "$name: exit status $rc, expected $want"; return 1; }
  (( $(wc -c <"$T/err") <= 2048 )) || { fail "$name: $(wc -c <"$T/err") bytes on stderr"; return 1; }
  grep -Eqi 'segmentation|internal error|terminate called' "$T/err" && { fail "$name: a crash"; return 1; }
  return 0
}
err_has() { grep -Eq -- "$2" "$T/err" || fail "$1: stderr lacks /$2/"; }

cd "$T" || exit 1
source "$here/tiny_job.sh"
tiny_data "$strata" "$T" || { echo "data prepare failed"; exit 1; }
tiny_config config.json tiny.train.tok 6 3
tg() { OMP_NUM_THREADS=1 "$train_gpt" --config config.json --threads 1 "$@"; }

# 1. Killed during its first save: step_00000003/ without a manifest is not a checkpoint.
mkdir -p ck/step_00000003
echo partial >ck/step_00000003/rank_00000.h5.tmp
if expect "uncommitted first save" 0 tg --checkpoint-dir ck; then
  grep -q "checkpoints: none under ck yet; starting fresh" "$T/out" || fail "uncommitted first save: did not start fresh"
  err_has "uncommitted first save" "ignoring ck/step_00000003 \(no manifest.json: a save that did not finish\)"
fi

# 3. Edited manifest contents: refused by verify, skipped (with a warning) by a resume.
for edit in "m['state']['optimizer_updates'] += 1" "m['state']['sampler']['position'] += 2"; do
  python3 - "$edit" <<'PY'
import json, sys
p = 'ck/step_00000006/manifest.json'
m = json.load(open(p))
exec(sys.argv[1])
open(p, 'w').write(json.dumps(m, indent=1))
PY
  if expect "edited manifest ($edit): verify" 1 "$strata" ckpt verify ck; then
    grep -q "manifest.json: checksum mismatch" "$T/out" || fail "edited manifest ($edit): verify does not say so"
  fi
  if expect "edited manifest ($edit): resume" 0 tg --checkpoint-dir ck --resume auto; then
    grep -q "resumed from ck/step_00000003" "$T/out" || fail "edited manifest ($edit): did not fall back to step 3"
    err_has "edited manifest ($edit): resume" "step_00000006/manifest.json: checksum mismatch"
  fi
done

# 4. Deep nesting and huge numbers: one short line, exit 1, from both programs.
python3 -c "print('{\"train_micro_batch_size_per_gpu\": ' + '[' * 100000 + ']' * 100000 + '}')" >deep.json
python3 -c "print('{\"train_micro_batch_size_per_gpu\": 1' + '7' * 100000 + '}')" >long_number.json
for f in deep long_number; do
  expect "$f: config check" 1 "$strata" config check $f.json && err_has "$f: config check" "$f.json:1:"
  expect "$f: train_gpt" 1 "$train_gpt" --config $f.json && err_has "$f: train_gpt" "$f.json:1:"
done
expect "deep --set value" 1 "$strata" config check config.json --set "strata.seed=$(python3 -c "print('[' * 100000)")" &&
  err_has "deep --set value" "nested more than 64 levels"

# 5. Outputs are written only over regular files (or missing paths).
if mknod full_device c 1 7 2>/dev/null; then device=full_device; else mkfifo full_device; device=full_device; fi
expect "export over a device" 1 "$strata" ckpt export ck --format h5 --output $device &&
  err_has "export over a device" "is a (character device|FIFO), not a regular file"
[[ -f $device ]] && fail "export replaced $device with a regular file"
# (without .h5 the output is a Hugging Face directory)
expect "HF export over a device" 1 "$strata" ckpt export ck --output $device &&
  err_has "HF export over a device" "is a (character device|FIFO), not a directory"
[[ -f $device ]] && fail "HF export replaced $device with a regular file"
mkdir -p hf_out
mkfifo hf_out/model.safetensors
expect "HF export over a FIFO" 1 "$strata" ckpt export ck --output hf_out &&
  err_has "HF export over a FIFO" "model.safetensors' is a FIFO, not a regular file"
[[ -p hf_out/model.safetensors ]] || fail "HF export replaced hf_out/model.safetensors"
mkdir -p out_dir
expect "export into a directory" 1 "$strata" ckpt export ck --format h5 --output out_dir &&
  err_has "export into a directory" "is a directory"
expect "export into /proc" 1 "$strata" ckpt export ck --output /proc/strata-test-export.h5 &&
  err_has "export into /proc" "cannot create files in '/proc'"
expect "HF export into /proc" 1 "$strata" ckpt export ck --output /proc/strata-test-hf &&
  err_has "HF export into /proc" "cannot create entries in '/proc'"
expect "import over a file" 1 "$strata" ckpt import tiny.train.tok --output config.json

# 6. Unusable values are refused at start-up.
for v in "--restart-delay nan" "--restart-delay 1e300" "--watchdog inf" "--kill-grace -1"; do
  # shellcheck disable=SC2086
  expect "strata run $v" 1 "$strata" run -n 1 $v --dry-run -- /bin/true && err_has "strata run $v" "${v%% *}"
done
if expect "checkpoint dir is a file" 1 tg --checkpoint-dir /etc/passwd; then
  err_has "checkpoint dir is a file" "'/etc/passwd' is a file, not a directory"
  grep -q "^step " "$T/out" && fail "checkpoint dir is a file: training started before the error"
fi
if [[ -c $device ]]; then
  expect "metrics on a full device" 1 tg --metrics $device --set strata.checkpoint.interval=0 &&
    err_has "metrics on a full device" "cannot write the metrics file '$device': No space left on device"
fi

# 7. One exit-status table: bad input 1, usage 2, in both programs.
echo '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stgae": 1}}' >bad_key.json
expect "config error (strata)" 1 "$strata" config check bad_key.json
expect "config error (train_gpt)" 1 "$train_gpt" --config bad_key.json
expect "missing data (train_gpt)" 1 tg --set strata.data.train=missing.tok
expect "usage (strata)" 2 "$strata" config check --no-such-flag config.json
expect "usage (train_gpt)" 2 "$train_gpt" --no-such-flag
python3 -c "
import json; p = 'ck/step_00000006/manifest.json'; m = json.load(open(p)); m['step'] = 7
open(p, 'w').write(json.dumps(m))"
expect "edited checkpoint named (train_gpt)" 1 tg --checkpoint-dir ck --resume ck/step_00000006

# (b) A bad-input failure under strata run is not restarted, and its error shows once.
if expect "strata run: config error" 1 "$strata" run -n 1 --restart-delay 0 --log-dir logs -- \
    "$train_gpt" --config bad_key.json; then
  [[ $(grep -c "stgae" "$T/err") == 1 ]] || fail "strata run: the config error is not shown exactly once"
  grep -q "attempt 2" "$T/err" && fail "strata run: the config error was restarted"
fi

(( failures == 0 )) || { echo "$failures failure(s)"; exit 1; }
echo "ok: hostile inputs"
