// Adafactor kernels. Elementwise work runs in chunks over OpenMP threads; every sum is taken in
// double in an order that does not depend on the thread count (per-chunk partials added in chunk
// order, rows and column stripes each summed by one thread).
#include "framework/optim/adafactor.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

namespace strata::optim {

namespace {

// Columns per stripe of the column sums (one thread each, rows in order).
constexpr std::int64_t kStripe = 256;

// Sum over [0, n) of f(begin, count) per chunk, added in chunk order.
template <typename F>
double chunked_sum(std::size_t n, F&& f) {
  const std::size_t chunks = (n + detail::kChunk - 1) / detail::kChunk;
  std::vector<double> part(chunks, 0.0);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t c) { part[b / detail::kChunk] = f(b, c); });
  double s = 0.0;
  for (double p : part) s += p;
  return s;
}

inline float sq_plus_eps(float g, float eps1) { return g * g + eps1; }

void round_to_16(const float* src, std::uint16_t* dst, std::size_t n, DType dt16) {
  if (dt16 == DType::bf16) f32_to_bf16(src, dst, n);
  else f32_to_f16(src, dst, n);
}


// The kernels below are plain loops over contiguous rows, compiled for AVX2+FMA and for the
// baseline (chosen at run time). -ffp-contract=off and explicit fma keep the arithmetic the same
// in both; sums use 8 independent accumulators in a fixed order (deterministic, vectorisable).
// Not under ThreadSanitizer (the baseline loops only): GCC instruments the ifunc resolver that
// target_clones makes, and the dynamic loader runs that resolver before the TSan runtime is set
// up, so every program linking this file died with SIGSEGV before main (tests/sanitizers/README.md).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define STRATA_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define STRATA_CLONES
#endif

constexpr std::size_t kLanes = 8;

inline double fold(const double* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Sum over columns [c0, c1) of row (g = row + c) of (g·gs)² + eps1.
STRATA_CLONES double row_sq_sum(const float* row, std::int64_t c0, std::int64_t c1, float gs,
                                float eps1) {
  double acc[kLanes] = {};
  const float* g = row + c0;
  const auto n = static_cast<std::size_t>(c1 - c0);
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t k = 0; k < kLanes; ++k) acc[k] += sq_plus_eps(g[i + k] * gs, eps1);
  for (; i < n; ++i) acc[0] += sq_plus_eps(g[i] * gs, eps1);
  return fold(acc);
}

// col[c] += (row[c]·gs)² + eps1 for c in [c0, c1).
STRATA_CLONES void col_sq_add(const float* row, std::int64_t c0, std::int64_t c1, float gs,
                              float eps1, double* col) {
  for (std::int64_t c = c0; c < c1; ++c) col[c] += sq_plus_eps(row[c] * gs, eps1);
}

// Sum of ((rf·cf[c])·(g[c]·gs))² over n columns.
STRATA_CLONES double factored_sq_sum(const float* g, float rf, const float* cf, std::size_t n,
                                     float gs) {
  double acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t k = 0; k < kLanes; ++k) {
      const float u = (rf * cf[i + k]) * (g[i + k] * gs);
      acc[k] += static_cast<double>(u) * u;
    }
  for (; i < n; ++i) {
    const float u = (rf * cf[i]) * (g[i] * gs);
    acc[0] += static_cast<double>(u) * u;
  }
  return fold(acc);
}

STRATA_CLONES double vector_sq_sum(const float* grad, const float* v, std::size_t n, float gs,
                                   float eps1, float b, float c) {
  double acc[kLanes] = {};
  auto term = [&](std::size_t i) {
    const float g = grad[i] * gs;
    const float vn = std::fma(sq_plus_eps(g, eps1), c, v[i] * b);
    const float u = (1.0f / std::sqrt(vn)) * g;
    return static_cast<double>(u) * u;
  };
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t k = 0; k < kLanes; ++k) acc[k] += term(i + k);
  for (; i < n; ++i) acc[0] += term(i);
  return fold(acc);
}

// Calls f(row, c0, c1, offset) for each row segment of the flat range [first, first + n) of a
// matrix with `cols` columns; offset = the segment's position in the range.
template <typename F>
void for_row_segments(std::int64_t first, std::size_t n, std::int64_t cols, F&& f) {
  const std::int64_t last = first + static_cast<std::int64_t>(n);
  for (std::int64_t at = first; at < last;) {
    const std::int64_t r = at / cols, c0 = at - r * cols;
    const std::int64_t c1 = std::min(cols, c0 + (last - at));
    f(r, c0, c1, static_cast<std::size_t>(at - first));
    at += c1 - c0;
  }
}

using ApplyConsts = detail::AdafactorApplyConsts;

// The common tail of both updates for one element whose raw update is u.
inline void finish(float& p, float u, float* m, const ApplyConsts& c) {
  u = u / c.clip;
  u = u * c.lr;
  if (c.beta1) {
    *m = std::fma(u, c.c1, *m * c.b1);
    u = *m;
  }
  if (c.decay) p = std::fma(p, c.wd, p);
  p = p - u;
}

STRATA_CLONES void apply_row(float* p, const float* g, float* m, float rf, const float* cf,
                             std::size_t n, const ApplyConsts& k) {
  if (m) {
    for (std::size_t i = 0; i < n; ++i) finish(p[i], (rf * cf[i]) * (g[i] * k.grad_scale), m + i, k);
  } else {
    for (std::size_t i = 0; i < n; ++i) finish(p[i], (rf * cf[i]) * (g[i] * k.grad_scale), nullptr, k);
  }
}

STRATA_CLONES void apply_vector_range(float* p, const float* grad, float* v, float* m,
                                      std::size_t n, float eps1, float b2, float c2,
                                      const ApplyConsts& k) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grad[i] * k.grad_scale;
    v[i] = std::fma(sq_plus_eps(g, eps1), c2, v[i] * b2);
    finish(p[i], (1.0f / std::sqrt(v[i])) * g, m ? m + i : nullptr, k);
  }
}

void check_16(std::uint16_t* param16, DType dt16) {
  if (param16)
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
}

ApplyConsts apply_consts(const AdafactorHyper& h, const AdafactorScalars& s) {
  return detail::adafactor_apply_consts(h, s);
}

}  // namespace

detail::AdafactorApplyConsts detail::adafactor_apply_consts(const AdafactorHyper& h,
                                                            const AdafactorScalars& s) {
  AdafactorApplyConsts c{};
  c.grad_scale = s.grad_scale;
  c.clip = static_cast<float>(s.clip_divisor);
  c.lr = static_cast<float>(s.lr);
  c.beta1 = h.has_beta1();
  c.b1 = static_cast<float>(h.beta1);
  c.c1 = static_cast<float>(1.0 - h.beta1);
  c.decay = h.weight_decay != 0.0;
  c.wd = static_cast<float>(-h.weight_decay * s.lr);
  return c;
}

void validate(const AdafactorHyper& h) {
  auto finite_pos = [](double x) { return std::isfinite(x) && x > 0.0; };
  if (!(std::isfinite(h.lr) && h.lr >= 0.0))
    user_fail("optim", "Adafactor lr must be finite and >= 0, got {}", h.lr);
  if (!finite_pos(h.eps1) || !finite_pos(h.eps2))
    user_fail("optim", "Adafactor eps must be two finite numbers > 0, got [{}, {}]", h.eps1, h.eps2);
  if (!finite_pos(h.clip_threshold))
    user_fail("optim", "Adafactor clip_threshold must be finite and > 0, got {}", h.clip_threshold);
  if (!(h.decay_rate >= -1.0 && h.decay_rate < 0.0))
    user_fail("optim", "Adafactor decay_rate must be in [-1, 0), got {}", h.decay_rate);
  if (h.has_beta1() && !(h.beta1 < 1.0))
    user_fail("optim", "Adafactor beta1 must be in [0, 1) or unset, got {}", h.beta1);
  if (!(std::isfinite(h.weight_decay) && h.weight_decay >= 0.0))
    user_fail("optim", "Adafactor weight_decay must be finite and >= 0, got {}", h.weight_decay);
  if (h.warmup_init && !h.relative_step)
    user_fail("optim", "Adafactor warmup_init needs relative_step = true");
}

double adafactor_beta2(const AdafactorHyper& h, std::int64_t step) {
  STRATA_CHECK(step >= 1, "optim", "Adafactor step must be >= 1 (1-based), got {}", step);
  return 1.0 - std::pow(static_cast<double>(step), h.decay_rate);
}

double adafactor_step_size(const AdafactorHyper& h, std::int64_t step, double lr) {
  if (!h.relative_step) return lr;
  const double t = static_cast<double>(step);
  const double cap = h.warmup_init ? 1e-6 * t : 1e-2;
  return std::min(cap, 1.0 / std::sqrt(t));
}

double adafactor_lr(const AdafactorHyper& h, double step_size, double rms_param) {
  return h.scale_parameter ? std::max(h.eps2, rms_param) * step_size : step_size;
}

double adafactor_clip_divisor(const AdafactorHyper& h, double rms_update) {
  return std::max(1.0, rms_update / h.clip_threshold);
}

void adafactor_sq_sums(const float* grad, std::int64_t first, std::size_t n, std::int64_t cols,
                       float gs, float eps1, double* row_sums, double* col_sums) {
  if (n == 0) return;
  const std::int64_t last = first + static_cast<std::int64_t>(n);  // exclusive
  const std::int64_t r0 = first / cols, r1 = (last - 1) / cols;  // rows met, inclusive
  // Row r's part of the range: columns [c_lo(r), c_hi(r)).
  auto c_lo = [&](std::int64_t r) { return r == r0 ? first - r0 * cols : 0; };
  auto c_hi = [&](std::int64_t r) { return r == r1 ? last - r1 * cols : cols; };
  auto row_ptr = [&](std::int64_t r) { return grad + (r * cols - first); };
  // Rows: one thread per row.
  const std::int64_t nrows = r1 - r0 + 1;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
#endif
  for (std::int64_t k = 0; k < nrows; ++k) {
    const std::int64_t r = r0 + k;
    row_sums[r] += row_sq_sum(row_ptr(r), c_lo(r), c_hi(r), gs, eps1);
  }
  // Columns: stripes, each over the rows in order.
  const std::int64_t stripes = (cols + kStripe - 1) / kStripe;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
#endif
  for (std::int64_t k = 0; k < stripes; ++k) {
    const std::int64_t s0 = k * kStripe, s1 = std::min(cols, s0 + kStripe);
    for (std::int64_t r = r0; r <= r1; ++r) {
      const std::int64_t a = std::max(s0, c_lo(r)), b = std::min(s1, c_hi(r));
      if (a < b) col_sq_add(row_ptr(r), a, b, gs, eps1, col_sums);
    }
  }
}

void adafactor_ema(float* stat, const double* sums, std::size_t n, double count, double beta2) {
  const float b = static_cast<float>(beta2), c = static_cast<float>(1.0 - beta2);
  for (std::size_t i = 0; i < n; ++i) {
    const float mean = static_cast<float>(sums[i] / count);
    stat[i] = std::fma(mean, c, stat[i] * b);
  }
}

void adafactor_factors(const float* row, std::int64_t rows, const float* col, std::int64_t cols,
                       float* rf, float* cf) {
  double s = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) s += row[r];
  const float mean = static_cast<float>(s / static_cast<double>(rows));
  for (std::int64_t r = 0; r < rows; ++r) rf[r] = 1.0f / std::sqrt(row[r] / mean);
  for (std::int64_t c = 0; c < cols; ++c) cf[c] = 1.0f / std::sqrt(col[c]);
}

double adafactor_factored_sumsq(const float* grad, std::int64_t first, std::size_t n,
                                std::int64_t cols, float gs, const float* rf, const float* cf) {
  return chunked_sum(n, [&](std::size_t b, std::size_t count) {
    double s = 0.0;
    for_row_segments(first + static_cast<std::int64_t>(b), count, cols,
                     [&](std::int64_t r, std::int64_t c0, std::int64_t c1, std::size_t at) {
                       s += factored_sq_sum(grad + b + at, rf[r], cf + c0,
                                            static_cast<std::size_t>(c1 - c0), gs);
                     });
    return s;
  });
}

double adafactor_vector_sumsq(const float* grad, const float* v, std::size_t n, float gs,
                              float eps1, double beta2) {
  const float b = static_cast<float>(beta2), c = static_cast<float>(1.0 - beta2);
  return chunked_sum(n, [&](std::size_t from, std::size_t count) {
    return vector_sq_sum(grad + from, v + from, count, gs, eps1, b, c);
  });
}

void adafactor_apply_factored(float* param, const float* grad, float* m, std::int64_t first,
                              std::size_t n, std::int64_t cols, const float* rf, const float* cf,
                              const AdafactorHyper& h, const AdafactorScalars& s,
                              std::uint16_t* param16, DType dt16) {
  check_16(param16, dt16);
  STRATA_CHECK(n == 0 || !h.has_beta1() || m, "optim", "Adafactor with beta1 needs its first moment");
  const ApplyConsts k = apply_consts(h, s);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    for_row_segments(first + static_cast<std::int64_t>(b), count, cols,
                     [&](std::int64_t r, std::int64_t c0, std::int64_t c1, std::size_t at) {
                       const std::size_t i = b + at;
                       apply_row(param + i, grad + i, m ? m + i : nullptr, rf[r], cf + c0,
                                 static_cast<std::size_t>(c1 - c0), k);
                     });
    if (param16) round_to_16(param + b, param16 + b, count, dt16);
  });
}

void adafactor_apply_vector(float* param, const float* grad, float* v, float* m, std::size_t n,
                            const AdafactorHyper& h, const AdafactorScalars& s,
                            std::uint16_t* param16, DType dt16) {
  check_16(param16, dt16);
  STRATA_CHECK(n == 0 || !h.has_beta1() || m, "optim", "Adafactor with beta1 needs its first moment");
  const ApplyConsts k = apply_consts(h, s);
  const float b2 = static_cast<float>(s.beta2), c2 = static_cast<float>(1.0 - s.beta2);
  const float eps1 = static_cast<float>(h.eps1);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    apply_vector_range(param + b, grad + b, v + b, m ? m + b : nullptr, count, eps1, b2, c2, k);
    if (param16) round_to_16(param + b, param16 + b, count, dt16);
  });
}

}  // namespace strata::optim
