#!/usr/bin/env bash
# AdamW8bit tracks AdamW: 200 steps of examples/gpt/configs/quickstart.json (the fortunes corpus,
# prepared here with `strata data prepare` as scripts/quickstart does) with each optimizer; the
# validation loss at step 200 must agree within 1 %, and the 8-bit run must report a quarter of
# AdamW's optimizer bytes. The two runs go side by side, one thread each (2 cores in CI).
# usage: train_gpt_optimizers.sh STRATA TRAIN_GPT SOURCE_DIR [STEPS]
set -u
strata="$1" train_gpt="$2" src="$3" steps="${4:-200}"
work=$(mktemp -d /tmp/strata_e2e_optimizers_XXXXXX)
trap 'rm -rf "$work"' EXIT
die() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done >&2
  exit 1
}
corpus=/usr/share/games/fortunes
[[ -d $corpus ]] || die "$corpus is missing: install Debian's fortunes-min (scripts/setup does)"
"$strata" data prepare --input "$corpus" --output "$work/fortunes" >/dev/null ||
  die "strata data prepare failed"

run() {  # run NAME OPTIMIZER
  "$train_gpt" --config "$src/examples/gpt/configs/quickstart.json" --threads 1 \
    --set "strata.data.train=$work/fortunes.train.tok" --set "strata.data.valid=$work/fortunes.val.tok" \
    --set "strata.train_steps=$steps" --set "strata.eval.interval=$steps" \
    --set strata.sample.tokens=0 --set "optimizer.type=$2" --metrics "$work/$1.jsonl" \
    --log-dir "$work/$1.d" >"$work/$1.log" 2>&1  # own log folders: the runs go side by side
}
start=$(date +%s)
run adamw AdamW &
a=$!
run adamw8bit AdamW8bit &
b=$!
wait $a || die "the AdamW run failed"
wait $b || die "the AdamW8bit run failed"
secs=$(($(date +%s) - start))

val() { grep -o '"val_loss":[0-9.eE+-]*' "$work/$1.jsonl" | tail -n 1 | cut -d: -f2; }
train() { grep -o '"loss":[0-9.eE+-]*' "$work/$1.jsonl" | tail -n 1 | cut -d: -f2; }
opt_bytes() { grep -o 'optimizer [0-9.]* [KMG]*i*B, total' "$work/$1.log" | head -n 1 | awk '{print $2, $3}' | tr -d ,; }
va=$(val adamw) vb=$(val adamw8bit)
[[ -n $va && -n $vb ]] || die "no validation loss at step $steps"
echo "after $steps steps (${secs}s): val loss AdamW $va, AdamW8bit $vb; train loss $(train adamw), $(train adamw8bit); optimizer state $(opt_bytes adamw) vs $(opt_bytes adamw8bit)"
grep -q "optimizer state AdamW8bit: 2.00 bytes per parameter" "$work/adamw8bit.log" ||
  die "train_gpt did not report AdamW8bit's 2 bytes per parameter"
awk -v a="$va" -v b="$vb" 'BEGIN { d = (b - a) / a; if (d < 0) d = -d; printf "val loss relative difference %.4f (limit 0.01)\n", d; exit !(d < 0.01) }' ||
  die "AdamW8bit's validation loss $vb is not within 1% of AdamW's $va"
awk -v a="$va" 'BEGIN { exit !(a < 3.5) }' || die "AdamW did not train (val loss $va, ln 256 = 5.55)"
