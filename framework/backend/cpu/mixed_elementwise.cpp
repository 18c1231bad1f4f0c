// Elementwise kernels on buffers of any float dtype: f32 buffers go to the f32 kernels; 16-bit
// ones are widened chunk by chunk into per-thread f32 scratch, computed, and rounded back.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/convert.hpp"

namespace strata::cpu {
namespace {

constexpr std::int64_t kMixedChunk = 16384;  // elements per task (a multiple of every vector width)

// Per-thread f32 scratch for up to three operands of one chunk.
float* scratch(int slot) {
  thread_local std::vector<float> buf(3 * static_cast<std::size_t>(kMixedChunk));
  return buf.data() + static_cast<std::size_t>(slot) * kMixedChunk;
}

// Elements [i0, i1) of b as f32: a pointer into b when it is f32, else widened into slot.
const float* in32(FloatBuf b, std::int64_t i0, std::int64_t i1, int slot) {
  if (b.dtype == DType::f32) return static_cast<const float*>(b.data) + i0;
  float* s = scratch(slot);
  convert(static_cast<const char*>(b.data) + i0 * static_cast<std::int64_t>(dtype_size(b.dtype)),
          b.dtype, s, DType::f32, static_cast<std::size_t>(i1 - i0));
  return s;
}

// Where to compute elements [i0, i1) of o in f32 (o itself when f32, else slot).
float* out32(FloatOut o, std::int64_t i0, int slot) {
  return o.dtype == DType::f32 ? static_cast<float*>(o.data) + i0 : scratch(slot);
}

// Stores the f32 results of a chunk into o (nothing to do when o is f32).
void store(FloatOut o, const float* r, std::int64_t i0, std::int64_t i1) {
  if (o.dtype == DType::f32) return;
  convert(r, DType::f32,
          static_cast<char*>(o.data) + i0 * static_cast<std::int64_t>(dtype_size(o.dtype)),
          o.dtype, static_cast<std::size_t>(i1 - i0));
}

bool all_f32(std::initializer_list<DType> ts) {
  return std::all_of(ts.begin(), ts.end(), [](DType t) { return t == DType::f32; });
}

template <class F>
void chunks(std::size_t n, F&& f) {
  detail::parallel_chunks(static_cast<std::int64_t>(n), kMixedChunk, f);
}

}  // namespace

void add(FloatBuf a, FloatBuf b, FloatOut out, std::size_t n) {
  if (all_f32({a.dtype, b.dtype, out.dtype})) {
    add(static_cast<const float*>(a.data), static_cast<const float*>(b.data),
        static_cast<float*>(out.data), n);
    return;
  }
  chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    const float* pa = in32(a, i0, i1, 0);
    const float* pb = in32(b, i0, i1, 1);
    float* po = out32(out, i0, 2);
    for (std::int64_t i = 0; i < i1 - i0; ++i) po[i] = pa[i] + pb[i];
    store(out, po, i0, i1);
  });
}

void add_inplace(FloatOut a, FloatBuf b, std::size_t n) {
  if (all_f32({a.dtype, b.dtype})) {
    add_inplace(static_cast<float*>(a.data), static_cast<const float*>(b.data), n);
    return;
  }
  chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    const float* pa = in32(FloatBuf{a.data, a.dtype}, i0, i1, 0);
    const float* pb = in32(b, i0, i1, 1);
    float* po = out32(a, i0, 2);
    for (std::int64_t i = 0; i < i1 - i0; ++i) po[i] = pa[i] + pb[i];
    store(a, po, i0, i1);
  });
}

void scale_inplace(FloatOut a, float s, std::size_t n) {
  if (a.dtype == DType::f32) {
    scale_inplace(static_cast<float*>(a.data), s, n);
    return;
  }
  chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    const float* pa = in32(FloatBuf{a.data, a.dtype}, i0, i1, 0);
    float* po = out32(a, i0, 2);
    for (std::int64_t i = 0; i < i1 - i0; ++i) po[i] = pa[i] * s;
    store(a, po, i0, i1);
  });
}

void gelu_forward(FloatBuf x, FloatOut y, std::size_t n) {
  if (all_f32({x.dtype, y.dtype})) {
    gelu_forward(static_cast<const float*>(x.data), static_cast<float*>(y.data), n);
    return;
  }
  const auto& rk = detail::row_kernels();
  chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    const float* px = in32(x, i0, i1, 0);
    float* py = out32(y, i0, 2);
    rk.gelu_forward(px, py, static_cast<std::size_t>(i1 - i0));
    store(y, py, i0, i1);
  });
}

void gelu_backward(FloatBuf x, FloatBuf dy, FloatOut dx, std::size_t n) {
  if (all_f32({x.dtype, dy.dtype, dx.dtype})) {
    gelu_backward(static_cast<const float*>(x.data), static_cast<const float*>(dy.data),
                  static_cast<float*>(dx.data), n);
    return;
  }
  const auto& rk = detail::row_kernels();
  chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    const float* px = in32(x, i0, i1, 0);
    const float* pd = in32(dy, i0, i1, 1);
    float* po = out32(dx, i0, 2);
    rk.gelu_backward(px, pd, po, static_cast<std::size_t>(i1 - i0));
    store(dx, po, i0, i1);
  });
}

}  // namespace strata::cpu
