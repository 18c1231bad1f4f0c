// CPU kernels on buffers of any float dtype (f32, bf16, f16): elementwise ops and the pieces of a
// softmax cross-entropy. 16-bit values are widened to f32 in small per-thread chunks, computed in
// f32 and rounded to nearest-even when stored, so no full-size f32 copy is ever made (the [N, V]
// logits of a large vocabulary stay 16-bit). For all-f32 buffers each gives bitwise the result
// of its f32 kernel in kernels.hpp. Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata::cpu {

// A buffer of n (or N×V) elements of a float dtype.
struct FloatBuf {
  const void* data;
  DType dtype;
};
struct FloatOut {
  void* data;
  DType dtype;
};

void add(FloatBuf a, FloatBuf b, FloatOut out, std::size_t n);  // out = a + b
void add_inplace(FloatOut a, FloatBuf b, std::size_t n);        // a += b
void scale_inplace(FloatOut a, float s, std::size_t n);         // a *= s
void gelu_forward(FloatBuf x, FloatOut y, std::size_t n);
// dx = gelu'(x) * dy; dx may alias dy.
void gelu_backward(FloatBuf x, FloatBuf dy, FloatOut dx, std::size_t n);

// Cross-entropy over rows of logits [N, V] (see ops.hpp for the meaning of each piece). Targets
// < 0 mark ignored rows; a target >= vocab_start + V (or, for the whole-vocabulary forms, >= V)
// is an error there and "not in this slice" in the sliced forms.
double cross_entropy_forward(FloatBuf logits, const std::int32_t* targets, float* lse, int N,
                             int V);
// dlogits may alias logits.
void cross_entropy_backward(FloatBuf logits, const float* lse, const std::int32_t* targets,
                            FloatOut dlogits, int N, int V, float scale);
void row_max(FloatBuf logits, float* out, int N, int V);
void row_sum_exp(FloatBuf logits, const float* max, float* out, int N, int V);
void target_logit(FloatBuf logits, const std::int32_t* targets, std::int64_t vocab_start,
                  float* out, int N, int V);
// The vocabulary-parallel cross-entropy's last step (ops::combine_cross_entropy): lse[r] =
// max[r] + log(sum_exp[r]); returns the sum, in row order, of double(lse[r]) - double(target[r])
// over the rows whose target is >= 0.
double combine_cross_entropy(const float* max, const float* sum_exp, const float* target,
                             const std::int32_t* targets, float* lse, std::int64_t N);
void cross_entropy_backward_slice(FloatBuf logits, const float* lse, const std::int32_t* targets,
                                  std::int64_t vocab_start, float scale, FloatOut dlogits, int N,
                                  int V);

}  // namespace strata::cpu
