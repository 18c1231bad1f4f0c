// Bodies of the AdamW and SGD updates, written once over the vector traits of cpu/vec.hpp:
// UpdatesOf<V> for one instruction set, kUpdateKernels<V> its table. Only optim/isa_*.cpp include
// this, each for its own traits, and the library is built with -ffp-contract=off, so the only fused
// multiply-adds are the explicit V::fma: every instruction set performs the same IEEE operations
// per element (the vector loop's tail runs the same body on one lane).
#pragma once

#include <cstddef>

#include "framework/backend/cpu/vec.hpp"
#include "framework/optim/update_kernels.hpp"

namespace strata::optim::detail {
namespace {

using cpu::simd::Scalar;

template <class V>
struct UpdatesOf {
  using vf = typename V::vf;

  // adamw.hpp gives the arithmetic; kSmallW picks lerp's form.
  template <bool kSmallW>
  static void adamw_run(float* p, const float* g, float* m, float* v, std::size_t n,
                        const AdamWConsts& c) {
    const vf gs = V::set1(c.grad_scale), decay = V::set1(c.decay);
    const vf w = V::set1(kSmallW ? c.w : c.w_minus_1);
    const vf b2 = V::set1(c.b2), c2 = V::set1(c.c2);
    const vf bc2s = V::set1(c.bc2_sqrt), eps = V::set1(c.eps);
    const vf ns = V::set1(c.neg_step);
    std::size_t i = 0;
    for (; i + V::W <= n; i += V::W) {
      const vf gi = V::mul(V::load(g + i), gs);
      const vf pd = V::mul(V::load(p + i), decay);
      vf mi = V::load(m + i);
      const vf d = V::sub(gi, mi);
      mi = V::fma(w, d, kSmallW ? mi : gi);
      const vf vi = V::fma(V::mul(c2, gi), gi, V::mul(V::load(v + i), b2));
      const vf denom = V::add(V::div(V::sqrt(vi), bc2s), eps);
      const vf pi = V::add(pd, V::div(V::mul(ns, mi), denom));
      V::store(m + i, mi);
      V::store(v + i, vi);
      V::store(p + i, pi);
    }
    if constexpr (V::W > 1) {
      UpdatesOf<Scalar>::adamw_run<kSmallW>(p + i, g + i, m + i, v + i, n - i, c);
    }
  }

  static void adamw(float* p, const float* g, float* m, float* v, std::size_t n,
                    const AdamWConsts& c) {
    if (c.small_w) {
      adamw_run<true>(p, g, m, v, n, c);
    } else {
      adamw_run<false>(p, g, m, v, n, c);
    }
  }

  // sgd.hpp gives the arithmetic.
  static void sgd(float* p, const float* g, float* buf, std::size_t n, const SgdConsts& c) {
    const vf gs = V::set1(c.grad_scale), wd = V::set1(c.wd);
    const vf mom = V::set1(c.mom), damp1 = V::set1(c.damp1);
    const vf neg_lr = V::set1(c.neg_lr);
    std::size_t i = 0;
    for (; i + V::W <= n; i += V::W) {
      const vf pi = V::load(p + i);
      vf gi = V::mul(V::load(g + i), gs);
      if (c.decay) gi = V::fma(pi, wd, gi);
      if (c.momentum) {
        const vf b = c.first ? gi : V::fma(gi, damp1, V::mul(V::load(buf + i), mom));
        V::store(buf + i, b);
        gi = c.nesterov ? V::fma(b, mom, gi) : b;
      }
      V::store(p + i, V::fma(gi, neg_lr, pi));
    }
    if constexpr (V::W > 1) {
      UpdatesOf<Scalar>::sgd(p + i, g + i, c.momentum ? buf + i : nullptr, n - i, c);
    }
  }
};

template <class V>
constexpr UpdateKernels kUpdateKernels = {UpdatesOf<V>::adamw, UpdatesOf<V>::sgd};

}  // namespace
}  // namespace strata::optim::detail
