#!/usr/bin/env bash
# A job killed after its last save, before that save's retention ran (or while retention's
# background deletion was still going), is started again: it resumes at the last step with
# nothing left to train, and must still leave the checkpoint directory as retention would — the
# newest save_total_limit checkpoints and nothing else (no older checkpoint, no incomplete step
# directory, no ".deleting-" directory). Found by the chaos soak (cluster/chaos): a node killed
# right after the last save left a ".deleting-" directory that no later save ever removed.
# usage: resume_cleans_up.sh STRATA TRAIN_GPT
set -u
here=$(cd "$(dirname "$0")" && pwd)
strata=$(realpath "$1")
train_gpt=$(realpath "$2")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$T"/out "$T"/err; do [[ -f "$f" ]] && { echo "--- $f"; tail -n 25 "$f"; }; done
  ls -la "$T/ck" 2>/dev/null
  exit 1
}
source "$here/tiny_job.sh"
tiny_data "$strata" "$T" || fail "data prepare failed"
tiny_config "$T/config.json" "$T/tiny.train.tok" 6 2
train() {
  (cd "$T" && env "$@" OMP_NUM_THREADS=1 "$train_gpt" --config "$T/config.json" --checkpoint-dir ck \
    --threads 1 --set strata.checkpoint.save_total_limit=1 >out 2>err) 2>/dev/null
  rc=$?
}
train STRATA_CHECKPOINT_FAULT=after_latest@6
[[ $rc != 0 ]] || fail "the run was not killed after its last save"
[[ $(cat "$T/ck/latest") == step_00000006 ]] || fail "latest does not name step 6"
[[ -d $T/ck/step_00000004 ]] || fail "no step 4: retention ran before the kill"
# What a crash during retention's background deletion leaves, and a save cut short.
mkdir -p "$T/ck/.deleting-step_00000002.99999.1" "$T/ck/step_00000003"
echo x >"$T/ck/.deleting-step_00000002.99999.1/rank_00000.h5"
echo x >"$T/ck/step_00000003/rank_00000.h5.tmp"
train
[[ $rc == 0 ]] || fail "the restarted run failed ($rc)"
grep -q "resumed from ck/step_00000006" "$T/out" || fail "did not resume from step 6"
left=$(cd "$T/ck" && ls -A | tr '\n' ' ')
[[ $left == "latest resolved_config.json step_00000006 " ]] || fail "left in the checkpoint directory: $left"
"$strata" ckpt verify --all "$T/ck" >/dev/null || fail "ckpt verify --all"
# A save killed after writing its manifest's temporary, done again by the restarted job: the
# step directory it keeps holds no temporary (the chaos soak, seed 765, found
# "step_00000021/manifest.json.tmp.6793" so).
rm -rf "$T/ck"
train STRATA_CHECKPOINT_FAULT=manifest_tmp@6
[[ $rc != 0 ]] || fail "the run was not killed in the save of step 6"
compgen -G "$T/ck/step_00000006/manifest.json.tmp.*" >/dev/null ||
  fail "the killed save left no manifest temporary to clean"
train
[[ $rc == 0 ]] || fail "the run restarted after a killed save failed ($rc)"
grep -q "resumed from ck/step_00000004" "$T/out" || fail "did not resume from step 4"
left=$(cd "$T/ck/step_00000006" && ls -A | grep -c tmp)
[[ $left == 0 ]] || fail "temporaries left in step 6: $(ls -A "$T/ck/step_00000006" | tr '\n' ' ')"
"$strata" ckpt verify --all "$T/ck" >/dev/null || fail "ckpt verify --all after the re-save"
echo "ok: resumed with no step left, the checkpoint directory holds what retention keeps and nothing else; a re-saved step holds no temporary of the killed save"
