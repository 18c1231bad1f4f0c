// The element-wise update kernels behind adamw.cpp and sgd.cpp: the float32 scalars of one step,
// one table of kernels per instruction set (optim/isa_*.cpp, bodies in update_body.hpp, all
// bitwise equal to the scalar one), and the chunked, threaded driver that runs them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"
#include "framework/optim/chunked.hpp"
#include "framework/optim/simd.hpp"

namespace strata::optim {
struct AdamWHyper;  // adamw.hpp
struct SGDHyper;    // sgd.hpp
struct LionHyper;   // lion.hpp
}  // namespace strata::optim

namespace strata::optim::detail {

// AdamW's scalars of one step, rounded from double exactly as PyTorch rounds them (adamw.hpp).
struct AdamWConsts {
  float grad_scale;
  float decay;      // f(1 - lr*wd)
  float w;          // lerp weight f(1 - b1)
  float w_minus_1;  // w - 1 (lerp's form for w >= 0.5)
  bool small_w;     // |w| < 0.5
  float b2;         // f(b2)
  float c2;         // f(1 - b2)
  float bc2_sqrt;   // f(sqrt(1 - b2^t))
  float eps;        // f(eps)
  float neg_step;   // f(-lr / (1 - b1^t))
};

// SGD's scalars of one step (sgd.hpp).
struct SgdConsts {
  float grad_scale;
  bool decay;     // wd != 0
  float wd;       // f(wd)
  bool momentum;  // momentum != 0
  bool first;     // step == 1: the buffer starts as the gradient
  bool nesterov;
  float mom;     // f(momentum)
  float damp1;   // f(1 - dampening)
  float neg_lr;  // f(-lr)
};

// Lion's scalars of one step (lion.hpp); Lion8bit's parameters without decay take decay = 1.
struct LionConsts {
  float gs;     // grad_scale
  float b1;     // f(b1)
  float c1;     // f(1 - b1)
  float b2;     // f(b2)
  float c2;     // f(1 - b2)
  float decay;  // f(1 - lr*wd)
  float lr;     // f(lr)
};

// The scalars of one step exactly as adamw.cpp / sgd.cpp compute them for their kernels (they
// validate h and throw on step < 1 as the updates do): exposed so that another backend (the CUDA
// kernels of backend/cuda/ops/optimizer.cu) runs on the very same float32 constants.
AdamWConsts adamw_consts(const AdamWHyper& h, std::int64_t step, float grad_scale);
SgdConsts sgd_consts(const SGDHyper& h, std::int64_t step, float grad_scale);
// The same for lion.cpp's Lion and Lion8bit (validates h, throws on step < 1).
LionConsts lion_consts(const LionHyper& h, std::int64_t step, float grad_scale);

struct UpdateKernels {
  void (*adamw)(float* p, const float* g, float* m, float* v, std::size_t n, const AdamWConsts& c);
  // buf is null when c.momentum is false.
  void (*sgd)(float* p, const float* g, float* buf, std::size_t n, const SgdConsts& c);
};

// The tables optim/isa_*.cpp provide; null when that instruction set was not compiled in.
const UpdateKernels* update_kernels_avx512();
const UpdateKernels* update_kernels_avx2();
const UpdateKernels* update_kernels_scalar();

// The table of `path`; throws if this CPU does not support it.
const UpdateKernels& update_kernels(SimdPath path);

// Throws unless param16 is null or dt16 is bf16 / f16.
void check_param16(const std::uint16_t* param16, DType dt16);
// dst[i] = src[i] rounded to nearest-even bf16 or f16 (dt16).
void round_to_16(const float* src, std::uint16_t* dst, std::size_t n, DType dt16);

// Runs update(begin, count) over [0, n) in chunks (for_each_chunk) and, when param16 is not null,
// rounds each updated chunk of param into it while the chunk is still in cache.
template <typename F>
void update_in_chunks(std::size_t n, const float* param, std::uint16_t* param16, DType dt16,
                      F&& update) {
  check_param16(param16, dt16);
  for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    update(b, count);
    if (param16) round_to_16(param + b, param16 + b, count, dt16);
  });
}

}  // namespace strata::optim::detail
