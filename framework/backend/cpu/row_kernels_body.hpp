// Bodies of the row kernels (row_kernels.hpp), written once over the vector traits of vec.hpp:
// RowKernelsOf<V> holds them for one instruction set and kRowKernels<V> is its table. Only the
// isa_*.cpp files include this, each for its own traits. Every reduction runs in an order fixed
// by the row length alone, so results never depend on how rows are spread over threads.
#pragma once

#include <cstddef>

#include "framework/backend/cpu/row_kernels.hpp"
#include "framework/backend/cpu/vec.hpp"

namespace strata::cpu::detail {
namespace {

template <class V>
struct RowKernelsOf {
  using vf = typename V::vf;
  static constexpr std::size_t W = V::W;

  // exp(x) for x in [-87.3, 88.3] (clamped outside): Cephes expf, about 1 ulp.
  static vf vexp(vf x) {
    x = V::min(V::max(x, V::set1(-87.3f)), V::set1(88.3f));
    const vf n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    vf r = V::madd(n, V::set1(-0.693359375f), x);
    r = V::madd(n, V::set1(2.12194440e-4f), r);
    const vf r2 = V::mul(r, r);
    vf p = V::set1(1.9875691500e-4f);
    p = V::madd(p, r, V::set1(1.3981999507e-3f));
    p = V::madd(p, r, V::set1(8.3334519073e-3f));
    p = V::madd(p, r, V::set1(4.1665795894e-2f));
    p = V::madd(p, r, V::set1(1.6666665459e-1f));
    p = V::madd(p, r, V::set1(5.0000001201e-1f));
    p = V::madd(p, r2, V::add(r, V::set1(1.0f)));
    return V::mul(p, V::pow2n(n));
  }

  template <bool Tail>
  static vf ld(const float* p, int cnt) {
    if constexpr (Tail) {
      return V::loadn(p, cnt);
    } else {
      return V::load(p);
    }
  }

  template <bool Tail>
  static void st(float* p, vf v, int cnt) {
    if constexpr (Tail) {
      V::storen(p, v, cnt);
    } else {
      V::store(p, v);
    }
  }

  // Calls f.operator()<Tail>(j, cnt) for each vector of [0, n): full vectors, then one masked tail.
  template <class F>
  static void for_vectors(std::size_t n, F&& f) {
    std::size_t j = 0;
    for (; j + W <= n; j += W) f.template operator()<false>(j, W);
    if (j < n) f.template operator()<true>(j, static_cast<int>(n - j));
  }

  // ---- GELU (tanh approximation) ------------------------------------------------------------
  // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3) equals x * s, s = 1 / (1 + exp(-2u)):
  // the same function, written without the cancellation of 1 + tanh(u) for negative x.
  static constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
  static constexpr float kGeluA = 0.044715f;

  static void gelu_forward(const float* x, float* y, std::size_t n) {
    const vf c1 = V::set1(-2.0f * kGeluK), c3 = V::set1(-2.0f * kGeluK * kGeluA), one = V::set1(1.0f);
    for_vectors(n, [&]<bool T>(std::size_t j, int cnt) {
      const vf v = ld<T>(x + j, cnt);
      const vf m2u = V::mul(v, V::madd(c3, V::mul(v, v), c1));  // -2u
      const vf s = V::div(one, V::add(one, vexp(m2u)));
      st<T>(y + j, V::mul(v, s), cnt);
    });
  }

  // d/dx = s + 2 x s (1 - s) k (1 + 3 a x^2) = s (1 + x (1 - s) (2k + 6ka x^2)).
  static void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) {
    const vf c1 = V::set1(-2.0f * kGeluK), c3 = V::set1(-2.0f * kGeluK * kGeluA), one = V::set1(1.0f);
    const vf d1 = V::set1(2.0f * kGeluK), d3 = V::set1(6.0f * kGeluK * kGeluA);
    for_vectors(n, [&]<bool T>(std::size_t j, int cnt) {
      const vf v = ld<T>(x + j, cnt);
      const vf g = ld<T>(dy + j, cnt);
      const vf v2 = V::mul(v, v);
      const vf s = V::div(one, V::add(one, vexp(V::mul(v, V::madd(c3, v2, c1)))));
      const vf inner = V::mul(V::mul(v, V::sub(one, s)), V::madd(d3, v2, d1));
      st<T>(dx + j, V::mul(g, V::mul(s, V::add(one, inner))), cnt);
    });
  }

  // ---- LayerNorm ---------------------------------------------------------------------------------
  static void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean,
                         float* rstd, int rows, int C, float eps) {
    const std::size_t n = static_cast<std::size_t>(C);
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + static_cast<std::size_t>(r) * n;
      float* yr = y + static_cast<std::size_t>(r) * n;
      vf acc = V::set1(0.0f);
      for_vectors(n, [&]<bool T>(std::size_t j, int cnt) { acc = V::add(acc, ld<T>(xr + j, cnt)); });
      const float m = V::hsum(acc) / static_cast<float>(C);
      const vf vm = V::set1(m);
      vf acc2 = V::set1(0.0f);
      for_vectors(n, [&]<bool T>(std::size_t j, int cnt) {
        vf d = V::sub(ld<T>(xr + j, cnt), vm);
        if constexpr (T) d = V::keep(d, cnt);
        acc2 = V::madd(d, d, acc2);
      });
      const float var = V::hsum(acc2) / static_cast<float>(C);
      const float rs = 1.0f / __builtin_sqrtf(var + eps);
      mean[r] = m;
      rstd[r] = rs;
      const vf vrs = V::set1(rs);
      for_vectors(n, [&]<bool T>(std::size_t j, int cnt) {
        const vf xh = V::mul(V::sub(ld<T>(xr + j, cnt), vm), vrs);
        const vf wv = w ? ld<T>(w + j, cnt) : V::set1(1.0f);
        const vf bv = b ? ld<T>(b + j, cnt) : V::set1(0.0f);
        st<T>(yr + j, V::madd(xh, wv, bv), cnt);
      });
    }
  }

  // dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)), dxh = dy * w.
  static void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean,
                          const float* rstd, float* dx, float* dw_acc, float* db_acc, int rows,
                          int C) {
    const std::size_t n = static_cast<std::size_t>(C);
    const float inv_c = 1.0f / static_cast<float>(C);
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + static_cast<std::size_t>(r) * n;
      const float* gr = dy + static_cast<std::size_t>(r) * n;
      float* dxr = dx + static_cast<std::size_t>(r) * n;
      const vf vm = V::set1(mean[r]), vrs = V::set1(rstd[r]);
      vf s1 = V::set1(0.0f), s2 = V::set1(0.0f);
      for_vectors(n, [&]<bool T>(std::size_t j, int cnt) {
        const vf g = ld<T>(gr + j, cnt);  // zero in the tail, so the tail adds nothing below
        const vf xh = V::mul(V::sub(ld<T>(xr + j, cnt), vm), vrs);
        const vf dxh = w ? V::mul(g, ld<T>(w + j, cnt)) : g;
        s1 = V::add(s1, dxh);
        s2 = V::madd(dxh, xh, s2);
        if (dw_acc) st<T>(dw_acc + j, V::madd(g, xh, ld<T>(dw_acc + j, cnt)), cnt);
        if (db_acc) st<T>(db_acc + j, V::add(g, ld<T>(db_acc + j, cnt)), cnt);
      });
      const vf m1 = V::set1(V::hsum(s1) * inv_c), m2 = V::set1(V::hsum(s2) * inv_c);
      for_vectors(n, [&]<bool T>(std::size_t j, int cnt) {
        const vf g = ld<T>(gr + j, cnt);
        const vf xh = V::mul(V::sub(ld<T>(xr + j, cnt), vm), vrs);
        const vf dxh = w ? V::mul(g, ld<T>(w + j, cnt)) : g;
        // rstd * (dxh - m1 - xh * m2)
        const vf t = V::sub(V::sub(dxh, m1), V::mul(xh, m2));
        st<T>(dxr + j, V::mul(vrs, t), cnt);
      });
    }
  }

  // ---- attention softmax (causal) -------------------------------------------------------------
  static void zero_span(float* p, int n) {
    if (n > 0) __builtin_memset(p, 0, static_cast<std::size_t>(n) * sizeof(float));
  }

  static float row_max(const float* s, int valid) {
    vf mx = V::set1(-3.0e38f);
    for_vectors(static_cast<std::size_t>(valid), [&]<bool T>(std::size_t j, int cnt) {
      if constexpr (T) {
        mx = V::max(mx, V::loadn_fill(s + j, cnt, -3.0e38f));
      } else {
        mx = V::max(mx, V::load(s + j));
      }
    });
    return V::hmax(mx);
  }

  // Returns sum_j exp(in[j] - m) over j < valid (fixed order); with kStore, out[j] = each term.
  template <bool kStore>
  static float exp_shift_sum(const float* in, float* out, int valid, float m) {
    const vf vm = V::set1(m);
    vf sum = V::set1(0.0f);
    for_vectors(static_cast<std::size_t>(valid), [&]<bool T>(std::size_t j, int cnt) {
      vf e = vexp(V::sub(ld<T>(in + j, cnt), vm));
      if constexpr (T) e = V::keep(e, cnt);
      sum = V::add(sum, e);
      if constexpr (kStore) st<T>(out + j, e, cnt);
    });
    return V::hsum(sum);
  }

  static void causal_softmax_forward(float* s, int lds, int rows, int row0, int ncols, float* lse) {
    for (int r = 0; r < rows; ++r) {
      float* sr = s + static_cast<std::size_t>(r) * static_cast<std::size_t>(lds);
      const int valid = row0 + r + 1;
      const float m = row_max(sr, valid);
      const float sum = exp_shift_sum<true>(sr, sr, valid, m);
      lse[r] = m + __builtin_logf(sum);
      const vf inv = V::set1(1.0f / sum);
      for_vectors(static_cast<std::size_t>(valid), [&]<bool T>(std::size_t j, int cnt) {
        st<T>(sr + j, V::mul(ld<T>(sr + j, cnt), inv), cnt);
      });
      zero_span(sr + valid, ncols - valid);
    }
  }

  static void causal_softmax_recompute(float* s, int lds, int rows, int row0, int ncols, const float* lse) {
    for (int r = 0; r < rows; ++r) {
      float* sr = s + static_cast<std::size_t>(r) * static_cast<std::size_t>(lds);
      const int valid = row0 + r + 1;
      const vf l = V::set1(lse[r]);
      for_vectors(static_cast<std::size_t>(valid), [&]<bool T>(std::size_t j, int cnt) {
        st<T>(sr + j, vexp(V::sub(ld<T>(sr + j, cnt), l)), cnt);
      });
      zero_span(sr + valid, ncols - valid);
    }
  }

  static void causal_softmax_backward(const float* p, float* dp, int lds, int rows, int row0, int ncols,
                               const float* d) {
    for (int r = 0; r < rows; ++r) {
      const std::size_t off = static_cast<std::size_t>(r) * static_cast<std::size_t>(lds);
      const float* pr = p + off;
      float* dr = dp + off;
      const int valid = row0 + r + 1;
      const vf dv = V::set1(d[r]);
      for_vectors(static_cast<std::size_t>(valid), [&]<bool T>(std::size_t j, int cnt) {
        st<T>(dr + j, V::mul(ld<T>(pr + j, cnt), V::sub(ld<T>(dr + j, cnt), dv)), cnt);
      });
      zero_span(dr + valid, ncols - valid);
    }
  }

  // ---- small reductions -------------------------------------------------------------------------
  static float dot(const float* a, const float* b, int n) {
    vf acc = V::set1(0.0f);
    for_vectors(static_cast<std::size_t>(n), [&]<bool T>(std::size_t j, int cnt) {
      acc = V::madd(ld<T>(a + j, cnt), ld<T>(b + j, cnt), acc);
    });
    return V::hsum(acc);
  }

  static float logsumexp(const float* x, int n) {
    const float m = row_max(x, n);
    return m + __builtin_logf(exp_shift_sum<false>(x, nullptr, n, m));
  }

  static void softmax_scaled(const float* x, float lse, float scale, float* dx, int n) {
    const vf l = V::set1(lse), sc = V::set1(scale);
    for_vectors(static_cast<std::size_t>(n), [&]<bool T>(std::size_t j, int cnt) {
      st<T>(dx + j, V::mul(vexp(V::sub(ld<T>(x + j, cnt), l)), sc), cnt);
    });
  }
};

template <class V>
constexpr RowKernels kRowKernels = {
    V::name,
    RowKernelsOf<V>::gelu_forward,
    RowKernelsOf<V>::gelu_backward,
    RowKernelsOf<V>::layernorm_forward,
    RowKernelsOf<V>::layernorm_backward,
    RowKernelsOf<V>::causal_softmax_forward,
    RowKernelsOf<V>::causal_softmax_recompute,
    RowKernelsOf<V>::causal_softmax_backward,
    RowKernelsOf<V>::dot,
    RowKernelsOf<V>::logsumexp,
    RowKernelsOf<V>::softmax_scaled,
};

}  // namespace
}  // namespace strata::cpu::detail
