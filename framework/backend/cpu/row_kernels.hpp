// Table of the vectorised inner loops (one row / one contiguous span at a time) that the CPU
// kernels are built from. One table per instruction set (isa_*.cpp); isa.hpp picks one at run time.
#pragma once

#include <cstddef>

namespace strata::cpu::detail {

struct RowKernels {
  const char* name;  // "avx512", "avx2", "generic"

  // y = gelu_tanh(x) over n elements; dx = gelu_tanh'(x) * dy (dx may alias dy).
  void (*gelu_forward)(const float* x, float* y, std::size_t n);
  void (*gelu_backward)(const float* x, const float* dy, float* dx, std::size_t n);

  // LayerNorm of `rows` rows of width C; writes y, mean, rstd.
  void (*layernorm_forward)(const float* x, const float* w, const float* b, float* y, float* mean,
                            float* rstd, int rows, int C, float eps);
  // dx overwritten; dw_acc[C] += sum_rows(dy * xhat), db_acc[C] += sum_rows(dy), rows in order.
  void (*layernorm_backward)(const float* dy, const float* x, const float* w, const float* mean,
                             const float* rstd, float* dx, float* dw_acc, float* db_acc, int rows,
                             int C);

  // Causal softmax of a block of score rows in place: row r is global row (row0 + r), valid
  // columns j <= row0 + r; columns up to ncols beyond that are set to 0. Writes lse[r].
  void (*causal_softmax_forward)(float* s, int lds, int rows, int row0, int ncols, float* lse);
  // P = exp(s - lse[r]) on the valid (causal) part, 0 beyond, in place.
  void (*causal_softmax_recompute)(float* s, int lds, int rows, int row0, int ncols,
                                   const float* lse);
  // dp = p * (dp - d[r]) on the valid part, 0 beyond, in place in dp (p and dp share lds).
  void (*causal_softmax_backward)(const float* p, float* dp, int lds, int rows, int row0, int ncols,
                                  const float* d);

  // sum_i a[i] * b[i].
  float (*dot)(const float* a, const float* b, int n);
  // log(sum_i exp(x[i])), computed stably.
  float (*logsumexp)(const float* x, int n);
  // dx[i] = exp(x[i] - lse) * scale (dx may alias x).
  void (*softmax_scaled)(const float* x, float lse, float scale, float* dx, int n);
};

// The tables each isa_*.cpp provides; null when that instruction set was not compiled in.
const RowKernels* row_kernels_avx512();
const RowKernels* row_kernels_avx2();
const RowKernels* row_kernels_generic();

}  // namespace strata::cpu::detail
