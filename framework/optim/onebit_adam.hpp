// 1-bit Adam (Tang et al. 2021) as DeepSpeed's OnebitAdam computes it: Adam without bias
// correction for freeze_step steps (gradients averaged over the data-parallel ranks as usual);
// then the second moment v is frozen, each rank folds its own (not averaged) gradient into its
// momentum m, the ranks average m by a 1-bit compressed all-reduce with error feedback (signs and
// one scale per tensor and per server chunk; parallel/comm/compressed_allreduce.hpp), and the
// update uses the averaged m and the frozen v. Here: the hyperparameters, the layout of the
// error-feedback buffers, and the element-wise kernels of the frozen phase (the warm-up phase is
// AdamW's kernel with bias_correction false: see onebit_warmup_hyper).
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>

#include "framework/core/dtype.hpp"
#include "framework/optim/adamw.hpp"

namespace strata::optim {

// DeepSpeed OnebitAdam's arguments that act, same names and defaults.
struct OneBitAdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  std::int64_t freeze_step = 100000;  // Adam steps before the variance freezes
  // Update t (1-based) is compressed when t > freeze_step.
  bool frozen(std::int64_t step) const { return step > freeze_step; }
};

// Throws UserError("[optim] ...") naming the bad value (AdamW's rules; freeze_step >= 0).
void validate(const OneBitAdamHyper& h);

// The warm-up update is AdamW's without bias correction (DeepSpeed's OnebitAdam never corrects):
// p·(1 - lr·wd) - lr·m/(sqrt(v) + eps), which is OnebitAdam's p - lr·(m/(sqrt(v)+eps) + wd·p).
AdamWHyper onebit_warmup_hyper(const OneBitAdamHyper& h);

// One tensor's momentum and its error-feedback buffers for the compressed all-reduce on `ranks`
// ranks: the tensor is padded with zeros to onebit_padded_size(n, ranks) elements (worker_error
// has that many), and each rank serves one chunk of padded / ranks elements (server_error).
struct ErrorFeedbackTensor {
  float* data = nullptr;  // n elements, averaged in place
  std::size_t n = 0;
  float* worker_error = nullptr;
  float* server_error = nullptr;
};

// DeepSpeed's padding: a multiple of ranks × lcm(ranks, 8), so every chunk is whole bytes of signs
// and the same size on every rank. (Inline: parallel/comm uses it without linking the kernels.)
inline std::size_t onebit_padded_size(std::size_t n, int ranks) {
  const auto r = static_cast<std::size_t>(ranks < 1 ? 1 : ranks);
  const std::size_t unit = r * std::lcm(r, std::size_t{8});
  return (n + unit - 1) / unit * unit;
}
// Worker and server error floats of a tensor of n elements: padded + padded / ranks.
inline std::size_t onebit_error_size(std::size_t n, int ranks) {
  const std::size_t p = onebit_padded_size(n, ranks);
  return p + p / static_cast<std::size_t>(ranks < 1 ? 1 : ranks);
}

// Frozen phase, before the exchange: m = f(b1)·m + f(1-b1)·(grad·grad_scale).
void onebit_momentum(float* m, const float* grad, std::size_t n, const OneBitAdamHyper& h,
                     float grad_scale);
// Frozen phase, after the exchange (m averaged, v frozen): p = p·f(1 - lr·wd), then
// p = p + (f(-lr)·m) / (sqrt(v) + f(eps)); the 16-bit copy written when param16 is given.
void onebit_apply(float* param, const float* m, const float* v, std::size_t n,
                  const OneBitAdamHyper& h, double lr, std::uint16_t* param16 = nullptr,
                  DType dt16 = DType::bf16);

}  // namespace strata::optim
