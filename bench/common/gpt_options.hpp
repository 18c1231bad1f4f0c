// The GPT shape options the benchmarks share: --layers, --embd, --heads, --seq, --vocab.
#pragma once

#include <CLI/CLI.hpp>

#include "framework/nn/gpt.hpp"

namespace strata::bench {

// `tp_note`: appended to the heads' and vocabulary's help where a tensor-parallel size must
// divide them.
inline void add_gpt_shape_options(CLI::App& app, nn::GptConfig& g, const char* tp_note = "") {
  app.add_option("--layers", g.n_layer, "transformer blocks");
  app.add_option("--embd", g.n_embd, "model width");
  app.add_option("--heads", g.n_head, std::string("attention heads") + tp_note);
  app.add_option("--seq", g.block_size, "sequence length (= block size)");
  app.add_option("--vocab", g.vocab_size, std::string("vocabulary") + tp_note);
}

}  // namespace strata::bench
