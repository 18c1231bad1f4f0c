#!/usr/bin/env bash
# examples/mlp — a user's own model — through the same engine, config and checkpoints as the GPT.
# usage: mlp.sh MODE STRATA MLP MPIEXEC
#   equivalence  np 2 (micro-batch 4, ZeRO-3, optimizer offloaded to host) vs np 1 (micro-batch
#                8, ZeRO 0), 10 AdamW steps: every step's loss within 1e-6 relative and the
#                exported weights within 1e-5 (relative L2) — the engine tests' standard for
#                stages 2-3 (a different summation order of the gradient reduction).
#   resume       np 2, ZeRO-3: 6 steps straight vs 3 steps (--exit-after-steps) + 3 resumed in a
#                new process: identical losses and bitwise identical exported weights.
set -u
mode="$1" strata="$2" mlp="$3" mpiexec="$4"
work=$(mktemp -d /tmp/strata_e2e_mlp_XXXXXX)
trap 'rm -rf "$work"' EXIT
die() {
  echo "FAIL: $*" >&2
  for f in "$work"/*/log; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done >&2
  exit 1
}
cat >"$work/config.json" <<JSON
{
  "train_batch_size": 8,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
  "strata": {"seed": 11, "train_steps": STEPS, "checkpoint": {"save_total_limit": 2}}
}
JSON
# run DIR NP STEPS ARGS...: the example in DIR, log in DIR/log.
run() {
  local dir="$1" np="$2" steps="$3"
  shift 3
  mkdir -p "$dir"
  sed "s/STEPS/$steps/" "$work/config.json" >"$dir/config.json"
  (cd "$dir" && "$mpiexec" --oversubscribe --bind-to none -np "$np" "$mlp" --config config.json \
    --threads 1 --metrics m.jsonl --checkpoint-dir ck "$@" >>log 2>&1)
}
losses() { grep -o '"loss": [^,]*' "$1" | sed 's/"loss": //'; }
export_weights() { "$strata" ckpt export "$1" --output "$2" >/dev/null || die "export of $1 failed"; }

if [[ $mode == equivalence ]]; then
  run "$work/one" 1 10 --set zero_optimization.stage=0 || die "np 1 run failed"
  run "$work/two" 2 10 --set zero_optimization.stage=3 \
    --set zero_optimization.offload_optimizer.device=cpu || die "np 2 ZeRO-3 run failed"
  grep -q "ZeRO stage 3" "$work/two/log" || die "the np 2 run did not say ZeRO stage 3"
  [[ $(losses "$work/one/m.jsonl" | wc -l) == 10 && $(losses "$work/two/m.jsonl" | wc -l) == 10 ]] ||
    die "both runs must log 10 losses"
  paste <(losses "$work/one/m.jsonl") <(losses "$work/two/m.jsonl") |
    awk '{d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > w) w = r}
         END {printf "worst loss difference %.2e relative\n", w; exit !(w <= 1e-6)}' >&2 ||
    die "losses differ by more than 1e-6 relative"
  export_weights "$work/one/ck" "$work/one.h5"
  export_weights "$work/two/ck" "$work/two.h5"
  # Debian's python3-h5py (scripts/setup) is for the system interpreter, which another python3
  # earlier on PATH may not be.
  py=""
  for p in /usr/bin/python3 python3; do "$p" -c "import h5py" 2>/dev/null && { py=$p; break; }; done
  [[ -n $py ]] || die "no python3 with h5py (scripts/setup installs python3-h5py)"
  "$py" - "$work/one.h5" "$work/two.h5" <<'PY' || die "weights differ by more than 1e-5"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert names, "no datasets"
num = den = 0.0
for n in names:
    x, y = np.asarray(a[n], np.float64), np.asarray(b[n], np.float64)
    assert x.shape == y.shape, (n, x.shape, y.shape)
    num += ((x - y) ** 2).sum(); den += (x ** 2).sum()
rel = (num / den) ** 0.5
print(f"{len(names)} tensors, weights relative L2 {rel:.2e}", file=sys.stderr)
sys.exit(0 if rel <= 1e-5 else 1)
PY
  echo "equivalence: np 2 ZeRO-3 + offload = np 1 within fp32 noise"
elif [[ $mode == resume ]]; then
  run "$work/a" 2 6 --set zero_optimization.stage=3 || die "straight run failed"
  run "$work/b" 2 6 --set zero_optimization.stage=3 --exit-after-steps 3 || die "interrupted run failed"
  [[ -f $work/b/ck/step_00000003/manifest.json ]] || die "no checkpoint at step 3"
  run "$work/b" 2 6 --set zero_optimization.stage=3 || die "resumed run failed"
  grep -q "resumed from ck/step_00000003: step 3" "$work/b/log" || die "the second run did not resume"
  [[ $(losses "$work/a/m.jsonl" | wc -l) == 6 ]] || die "straight run did not log 6 losses"
  diff <(losses "$work/a/m.jsonl") <(losses "$work/b/m.jsonl") >&2 ||
    die "losses of the resumed run differ from the straight run"
  export_weights "$work/a/ck" "$work/a.h5"
  export_weights "$work/b/ck" "$work/b.h5"
  h5diff --exclude-attribute / "$work/a.h5" "$work/b.h5" >&2 ||
    die "exported weights of the resumed run differ from the straight run"
  echo "resume: 6 losses and the exported weights are identical"
else
  die "unknown mode $mode"
fi
