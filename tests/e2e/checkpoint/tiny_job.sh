# Sourced by the checkpoint e2e scripts: a tiny corpus and a config that trains a tiny GPT on it
# in well under a second per run.

# tiny_data STRATA DIR: DIR/tiny.train.tok (and .val) from a generated corpus.
tiny_data() {
  local i
  for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog"; done \
    >"$2/corpus.txt"
  "$1" data prepare --input "$2/corpus.txt" --output "$2/tiny" >/dev/null
}

# tiny_config FILE TRAIN_TOKENS STEPS INTERVAL [ZERO_STAGE] [ASYNC] [N_EMBD]
tiny_config() {
  cat >"$1" <<JSON
{
  "train_micro_batch_size_per_gpu": 2,
  "steps_per_print": 100,
  "zero_optimization": {"stage": ${5:-0}},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
  "strata": {
    "seed": 5, "train_steps": $3,
    "model": {"type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": ${7:-16}, "block_size": 16, "vocab_size": 256},
    "data": {"train": "$2", "shuffle": true},
    "sample": {"tokens": 0},
    "checkpoint": {"interval": $4, "async": ${6:-false}}
  }
}
JSON
}
