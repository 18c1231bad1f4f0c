# Sourced by the train_gpt e2e scripts: `tiny_job NAME STRATA` makes $work (a temporary folder
# removed on exit), `die` (fails naming why, with the tail of every $work/*/log) and a tiny
# byte-level corpus, $work/tiny.train.tok and $work/tiny.val.tok.
die() {
  echo "FAIL: $*" >&2
  for f in "$work"/*/log; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done >&2
  exit 1
}
tiny_job() {
  work=$(mktemp -d "/tmp/strata_e2e_$1_XXXXXX")
  trap 'rm -rf "$work"' EXIT
  for i in $(seq 1 600); do
    echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7 % 13)) times"
  done >"$work/corpus.txt"
  "$2" data prepare --input "$work/corpus.txt" --output "$work/tiny" >/dev/null ||
    die "strata data prepare failed"
}
