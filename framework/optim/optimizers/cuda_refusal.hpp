// The refusal (Refusals::gpu) of an optimizer without CUDA kernels, naming those that have them:
// one place to update when an optimizer's update gains a CUDA kernel (its ops:: entry in the CUDA
// table) and its own refusal goes.
#pragma once

namespace strata::optim {

inline constexpr const char* kNoCudaKernels =
    "it has no CUDA kernels; AdamW, SGD, Lion, Lion8bit, AdamW8bit, Adafactor and Lamb have";

}  // namespace strata::optim
