// Activation recomputation (`strata.activation_checkpointing`): what a transformer block keeps for
// backward and what it computes again there (docs/memory.md, "What each mode keeps").
#pragma once

namespace strata::nn {

enum class Recompute {
  none,       // keep every tensor backward reads
  selective,  // drop what is cheap to redo (LayerNorm and GELU outputs, the attention core's output
              // and log-sum-exps), recompute it in backward from what is kept; no matrix product
              // with a weight is redone
  full,       // keep only each block's input; recompute the whole block in backward
};

}  // namespace strata::nn
