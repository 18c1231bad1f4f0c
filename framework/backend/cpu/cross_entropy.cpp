// Softmax cross-entropy over rows of logits with ignored rows (target < 0), on logits of any float
// dtype (the f32 kernels of kernels.hpp too), whole-vocabulary and in the pieces of a
// vocabulary-parallel one. f32 rows are read in place; other rows are widened one at a time into
// per-thread f32 scratch.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"

namespace strata::cpu {
namespace {

std::int64_t ce_row_chunk(int V) { return std::max<std::int64_t>(1, 16384 / std::max(1, V)); }

// Row r of logits [N, V] as f32: a pointer into it when f32, else widened into thread scratch.
const float* row32(FloatBuf b, std::int64_t r, int V) {
  const std::size_t v = static_cast<std::size_t>(V);
  if (b.dtype == DType::f32) return static_cast<const float*>(b.data) + static_cast<std::size_t>(r) * v;
  thread_local std::vector<float> s;
  s.resize(v);
  convert(static_cast<const char*>(b.data) + static_cast<std::size_t>(r) * v * dtype_size(b.dtype),
          b.dtype, s.data(), DType::f32, v);
  return s.data();
}

// Where to compute row r of out in f32, and storing it.
float* out_row32(FloatOut o, std::int64_t r, int V) {
  const std::size_t v = static_cast<std::size_t>(V);
  if (o.dtype == DType::f32) return static_cast<float*>(o.data) + static_cast<std::size_t>(r) * v;
  thread_local std::vector<float> s;
  s.resize(v);
  return s.data();
}
void store_row(FloatOut o, const float* row, std::int64_t r, int V) {
  if (o.dtype == DType::f32) return;
  const std::size_t v = static_cast<std::size_t>(V);
  convert(row, DType::f32,
          static_cast<char*>(o.data) + static_cast<std::size_t>(r) * v * dtype_size(o.dtype), o.dtype, v);
}

void check_targets(const std::int32_t* targets, int N, int V) {
  for (int i = 0; i < N; ++i)
    STRATA_CHECK(targets[i] < V, "cpu",
                 "cross_entropy: target {} of row {} is outside the vocabulary of {}", targets[i],
                 i, V);
}

// The target's column in a slice [start, start + V), or -1 when it is ignored or elsewhere.
int local_target(std::int32_t t, std::int64_t start, int V) {
  if (t < 0 || t < start || t >= start + V) return -1;
  return static_cast<int>(t - start);
}

}  // namespace

double cross_entropy_forward(FloatBuf logits, const std::int32_t* targets, float* lse, int N,
                             int V) {
  STRATA_CHECK(N >= 0 && V > 0, "cpu", "cross_entropy: bad size N={} V={}", N, V);
  check_targets(targets, N, V);
  const auto& rk = detail::row_kernels();
  std::vector<double> loss(static_cast<std::size_t>(N), 0.0);
  detail::parallel_chunks(N, ce_row_chunk(V), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = row32(logits, r, V);
      const float l = rk.logsumexp(row, V);
      lse[r] = l;
      const std::int32_t t = targets[r];
      if (t >= 0) loss[static_cast<std::size_t>(r)] = static_cast<double>(l) - row[t];
    }
  });
  double total = 0.0;
  for (double x : loss) total += x;
  return total;
}

void cross_entropy_backward(FloatBuf logits, const float* lse, const std::int32_t* targets,
                            FloatOut dlogits, int N, int V, float scale) {
  STRATA_CHECK(N >= 0 && V > 0, "cpu", "cross_entropy: bad size N={} V={}", N, V);
  check_targets(targets, N, V);
  cross_entropy_backward_slice(logits, lse, targets, 0, scale, dlogits, N, V);
}

// The f32 kernels are the same loops on rows that need no widening.
double cross_entropy_forward(const float* logits, const std::int32_t* targets, float* lse, int N,
                             int V) {
  return cross_entropy_forward(FloatBuf{logits, DType::f32}, targets, lse, N, V);
}

void cross_entropy_backward(const float* logits, const float* lse, const std::int32_t* targets,
                            float* dlogits, int N, int V, float scale) {
  cross_entropy_backward(FloatBuf{logits, DType::f32}, lse, targets, FloatOut{dlogits, DType::f32},
                         N, V, scale);
}

void row_max(FloatBuf logits, float* out, int N, int V) {
  detail::parallel_chunks(N, ce_row_chunk(V), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = row32(logits, r, V);
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < V; ++j) m = std::max(m, row[j]);
      out[r] = m;
    }
  });
}

void row_sum_exp(FloatBuf logits, const float* max, float* out, int N, int V) {
  detail::parallel_chunks(N, ce_row_chunk(V), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = row32(logits, r, V);
      double s = 0.0;
      for (int j = 0; j < V; ++j) s += std::exp(static_cast<double>(row[j]) - max[r]);
      out[r] = static_cast<float>(s);
    }
  });
}

void target_logit(FloatBuf logits, const std::int32_t* targets, std::int64_t vocab_start,
                  float* out, int N, int V) {
  const std::size_t es = dtype_size(logits.dtype);
  for (int r = 0; r < N; ++r) {
    const int j = local_target(targets[r], vocab_start, V);
    float x = 0.0f;
    if (j >= 0)
      convert(static_cast<const char*>(logits.data) + (static_cast<std::size_t>(r) * V + j) * es,
              logits.dtype, &x, DType::f32, 1);
    out[r] = x;
  }
}

double combine_cross_entropy(const float* max, const float* sum_exp, const float* target,
                             const std::int32_t* targets, float* lse, std::int64_t N) {
  double total = 0.0;
  for (std::int64_t r = 0; r < N; ++r) {
    lse[r] = max[r] + std::log(sum_exp[r]);
    if (targets[r] >= 0) total += static_cast<double>(lse[r]) - target[r];
  }
  return total;
}

void cross_entropy_backward_slice(FloatBuf logits, const float* lse, const std::int32_t* targets,
                                  std::int64_t vocab_start, float scale, FloatOut dlogits, int N,
                                  int V) {
  const auto& rk = detail::row_kernels();
  detail::parallel_chunks(N, ce_row_chunk(V), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int32_t t = targets[r];
      const float* row = row32(logits, r, V);  // read before dlogits (which may alias) is written
      float* d = out_row32(dlogits, r, V);
      if (t < 0) {
        std::fill(d, d + V, 0.0f);
      } else {
        rk.softmax_scaled(row, lse[r], scale, d, V);
        const int j = local_target(t, vocab_start, V);
        if (j >= 0) d[j] -= scale;
      }
      store_row(dlogits, d, r, V);
    }
  });
}

}  // namespace strata::cpu
