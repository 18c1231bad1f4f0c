// A unit's owned slice as the block-wise 8-bit optimizers' ops take it (AdamW8bit, Lion8bit): the
// decay runs of its parameter parts, which cover [0, n) since parameters are contiguous from flat 0,
// and the first n elements / quant_blocks(n) blocks of its buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/optim/adamw8bit.hpp"
#include "framework/optim/optimizers/optimizer.hpp"
#include "framework/optim/quantize.hpp"

namespace strata::optim {

struct BlockwiseSlice {
  std::vector<DecayRun> runs;  // empty: the rank owns nothing of the unit
  std::int64_t n = 0;          // owned elements
  std::int64_t blocks = 0;     // quantization blocks of them

  explicit BlockwiseSlice(UnitSlice& s) {
    s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
      runs.push_back({static_cast<std::size_t>(lo), static_cast<std::size_t>(hi), p.decay});
    });
    if (runs.empty()) return;
    n = static_cast<std::int64_t>(runs.back().end);
    blocks = static_cast<std::int64_t>(quant_blocks(runs.back().end));
  }
  // t's first n elements (an undefined t stays undefined).
  Tensor elements(const Tensor& t) const { return t.defined() ? t.slice(0, 0, n) : Tensor(); }
  // t's first `blocks` entries (per-block state).
  Tensor per_block(const Tensor& t) const { return t.slice(0, 0, blocks); }
};

}  // namespace strata::optim
