// A unit's optimizer state in checkpoints, read from the optimizer's declaration
// (optim::Declaration::state; docs/optimizers.md), and how a rank reads its owned part back on any
// dp size or ZeRO stage. Per state tensor, by its shape:
//   elements     kind on each parameter, the owned elements (a tensor-parallel part's named by the
//                whole parameter's elements)
//   blocks       kind on "<unit's first param>#<entry>", global block range; blocks never
//                straddle two ranks, so any resharding keeps them intact (no re-quantization)
//   vectors      kind on each parameter with fewer than 2 dims, its owned elements
//   factored     kind_row / kind_col on "<param>#row" / "<param>#col", whole, written once (dp
//                rank 0), read by every rank
//   per_param    kind on "<param>#<entry>", whole, written once, read by every rank
//   rank_errors  kind on "<param>#errors_<rank>_of_<ranks>": each rank's own, read back by the
//                same rank on as many ranks, else zeroed
// A unit's slices are written in that order: elements, blocks, parameter by parameter the vectors
// and factored pieces, per_param, rank_errors (the order of the files written before optimizers
// became objects). No optimizer is named here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "framework/checkpoint/flat_range.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"

namespace strata::parallel {

// A unit's parameters as the checkpoint's flat-range helpers see them.
std::vector<checkpoint::FlatParam> flat_params(const nn::UnitLayout& l);

// A tensor-parallel part's elements [begin, end) of parameter p, as (element of the part, element
// of the whole parameter, count) pieces: one for a whole parameter, one per run of its placement.
template <typename F>
void to_global(const nn::Parameter& p, std::int64_t begin, std::int64_t end, F&& piece) {
  p.placement.for_each_run(p.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
    const std::int64_t a = std::max(begin, local), b = std::min(end, local + n);
    if (a < b) piece(a, global + (a - local), b - a);
  });
}

// The slices a tensor-parallel part writes of its elements [begin, end) of parameter p: the
// pieces of to_global, with consecutive full runs of one length at one stride (a parameter split
// along a later dimension: one run per row) joined into one hyperslab slice. Calls
// f(element of the part, element of the whole parameter, count, run, stride): run 0 for a flat
// piece, else `count` elements in rows of `run`, `stride` apart in the whole parameter (the part's
// elements stay contiguous).
template <typename F>
void to_global_slices(const nn::Parameter& p, std::int64_t begin, std::int64_t end, F&& slice) {
  std::int64_t local0 = 0, global0 = 0, run = 0, stride = 0, rows = 0;
  auto flush = [&] {
    if (rows == 0) return;
    if (rows == 1 || stride == run) slice(local0, global0, rows * run, std::int64_t{0}, std::int64_t{0});
    else slice(local0, global0, rows * run, run, stride);
    rows = 0;
  };
  to_global(p, begin, end, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
    const bool joins = rows > 0 && n == run && local == local0 + rows * run &&
                       (rows == 1 ? global > global0 : global == global0 + rows * stride);
    if (joins) {
      if (rows == 1) stride = global - global0;
      ++rows;
      return;
    }
    flush();
    local0 = local;
    global0 = global;
    run = n;
    stride = 0;
    rows = 1;
  });
  flush();
}

// The manifest's name for the trainer's optimizer (its declaration's checkpoint_name: "adamw").
const std::string& checkpoint_optimizer_name(const train::Trainer& t);

// What a rank writes of unit u: the element range [a, b) of its flat buffer; its blocks (of any
// blocks state): the blocks of its owned slice when units are sharded (ZeRO >= 1), else its share
// of the unit's blocks by dp rank; whether it writes the state every rank holds whole; whose
// compression errors it writes. A default range (`writes` false) writes nothing.
struct StateSaveRange {
  std::int64_t a = 0, b = 0;
  bool writes = false;
  bool sharded = false;  // ZeRO >= 1: the rank owns [lo, hi) of each unit
  bool replicated = false;
  int dp_rank = 0, dp_size = 1;
};

// Calls f for each slice of unit u's optimizer state in `r` (the master / "param" slices are the
// caller's), pointing into s (the unit's state, its owned slice starting at flat layout.lo).
// Element-wise state of a tensor-parallel part (tp_index: its part) is named by the whole
// parameter's elements, replicated parameters written by part 0 only; the other shapes exist at
// tp 1 only (the optimizers that keep them refuse tp > 1: Refusals::tensor_parallel).
void for_each_state_slice(const train::Trainer& t, const nn::UnitLayout& l, std::size_t u,
                          const StateSaveRange& r, const train::UnitOptimizerState& s,
                          int tp_index, const std::function<void(const checkpoint::SliceRef&)>& f);
// The bytes those slices hold (staging buffers are sized with it before any state is read);
// `slices`, when given, is increased by their number.
std::size_t state_slice_bytes(const train::Trainer& t, const nn::UnitLayout& l, std::size_t u,
                              const StateSaveRange& r, int tp_index, std::size_t* slices = nullptr);

// UserError (one line) when the checkpoint's optimizer state cannot be loaded into the trainer:
// another optimizer, a state the optimizer cannot continue from (Optimizer::check_checkpoint:
// Adafactor with/without a first moment), or blocks of other units. Nothing to check when it holds
// no optimizer state.
void check_state_compatible(const checkpoint::CheckpointReader& reader, const nn::ParamStore& store,
                            const train::Trainer& t);
// Reads unit u's optimizer state for its owned range [lo, min(hi, numel)); zeroes it when the
// checkpoint holds none (with_moments false).
// Compression errors are read from this rank's own entry when the checkpoint was written by as
// many ranks, else zeroed (DeepSpeed always resets them on load).
void read_state(checkpoint::CheckpointReader& reader, const train::Trainer& t,
                const nn::UnitLayout& l, std::size_t u, train::UnitOptimizerState& s,
                bool with_moments, int dp_rank = 0, int dp_size = 1);

}  // namespace strata::parallel
