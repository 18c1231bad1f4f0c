// EvalSampler: one sequential, restartable pass over a (validation) token file's windows,
// split across data-parallel ranks the same way as BatchSampler but never shuffled or repeated.
#pragma once

#include <cstdint>

#include "framework/data/sampler.hpp"

namespace strata::data {

class EvalSampler {
 public:
  // Evaluates windows [0, min(windows, max_windows)) (max_windows 0: all). `file` must outlive
  // the sampler. Throws UserError("data") when the file holds less than one window.
  EvalSampler(const TokenFile& file, int seq_len, int micro_batch, int dp_size = 1, int dp_rank = 0,
              std::uint64_t max_windows = 0);

  // Fills this rank's rows of the next eval micro-batch ([micro_batch, seq_len] each) and returns
  // how many are real: row i is window position + dp_rank*micro_batch + i when that is below
  // windows(); rows past the end are zero-filled and not counted. Every rank must call next()
  // steps() times per pass (some ranks may get 0 real rows on the last call).
  int next(std::int32_t* inputs, std::int32_t* targets);

  bool done() const { return position_ >= w_.windows; }  // the same on every rank
  std::uint64_t steps() const;                           // calls per pass
  void reset() { position_ = 0; }
  std::uint64_t windows() const { return w_.windows; }

 private:
  WindowedFile w_;
  std::uint64_t position_ = 0;
};

}  // namespace strata::data
