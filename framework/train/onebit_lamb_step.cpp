#include "framework/train/onebit_lamb_step.hpp"

#include <cmath>
#include <cstring>

#include "framework/train/grad_view.hpp"
#include "framework/train/trainer.hpp"

namespace strata::train {

namespace {
optim::OneBitLambScalars* onebit_lamb_scalars(UnitOptimizerState& s, const nn::UnitLayout& l,
                                              std::size_t i) {
  static_assert(sizeof(optim::OneBitLambScalars) == optim::kOneBitLambScalars * sizeof(float));
  return reinterpret_cast<optim::OneBitLambScalars*>(s.factored.data<float>() +
                                                     OneBitLambStep::scalars_offset(l, i));
}

double onebit_lamb_decay(const optim::OneBitLambHyper& h, const nn::Parameter& p) {
  return p.decay ? h.weight_decay : 0.0;  // only parameters with >= 2 dims, as AdamW
}

void onebit_lamb_check_whole(const nn::UnitLayout& l, std::size_t u) {
  STRATA_CHECK(l.lo == 0 && l.hi >= l.numel, "train",
               "1-bit LAMB needs every unit whole (ZeRO stage 0): unit {} owns [{}, {})", u, l.lo,
               l.hi);
}

}  // namespace

OneBitLambStep::OneBitLambStep(const nn::ParamStore& store, const optim::OneBitLambHyper& h)
    : h_(h) {
  optim::validate(h);
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& l = store.layout(u);
    onebit_lamb_check_whole(l, u);
    num_params_ += l.params.size();
    fused_numel_ += l.numel;
  }
  while (errors_unit_ < store.num_units() && store.layout(errors_unit_).params.empty())
    ++errors_unit_;
}

std::int64_t OneBitLambStep::factored_size(const nn::UnitLayout& l) {
  return (l.hi - l.lo) + static_cast<std::int64_t>(optim::kOneBitLambScalars * l.params.size());
}

std::int64_t OneBitLambStep::scalars_offset(const nn::UnitLayout& l, std::size_t i) {
  return (l.hi - l.lo) + static_cast<std::int64_t>(optim::kOneBitLambScalars * i);
}

void OneBitLambStep::run(nn::ParamStore& store, OptimizerStateStore& states,
                         const ShardReductions& red, std::int64_t step, double lr,
                         float grad_scale) {
  if (h_.frozen(step))
    compressed(store, states, red, lr, grad_scale);
  else
    warmup(store, states, red, step, lr, grad_scale);
}

void OneBitLambStep::warmup(nn::ParamStore& store, OptimizerStateStore& states,
                            const ShardReductions& red, std::int64_t step, double lr,
                            float grad_scale) {
  const DType pd = store.options().param_dtype;
  optim::LambHyper h = optim::onebit_lamb_warmup_hyper(h_), h0 = h;
  h.lr = h0.lr = lr;
  h0.weight_decay = 0;
  // [sum p², sum u²] per parameter; units are whole, so the sum over shards adds nothing.
  std::vector<double> sums(2 * num_params_, 0.0);
  std::size_t k = 0;
  for_each_unit_grads(
      store, states, false, [&](std::size_t u, UnitOptimizerState& s, const float* g) {
        const nn::ValueShardScope held(store, u, false);
        const float* master = pd == DType::f32 ? held.get().data<float>() : s.master.data<float>();
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
          const std::int64_t off = l.offsets[i];
          const optim::LambSums ls = optim::lamb_sums(
              master + off, g + off, s.m.data<float>() + off, s.v.data<float>() + off,
              static_cast<std::size_t>(l.params[i]->shape.numel()), l.params[i]->decay ? h : h0,
              grad_scale);
          sums[2 * k] = ls.param_sq;
          sums[2 * k + 1] = ls.update_sq;
        }
      });
  red.sum_vector(sums);
  coeffs_.assign(num_params_, 1.0);
  for (std::size_t q = 0; q < num_params_; ++q)
    coeffs_[q] = optim::lamb_trust_ratio(h, sums[2 * q], sums[2 * q + 1]);
  k = 0;
  for_each_unit_grads(
      store, states, true, [&](std::size_t u, UnitOptimizerState& s, const float* g) {
        const nn::ValueShardScope held(store, u, /*dirty=*/true);
        const Tensor& vshard = held.get();
        float* master = pd == DType::f32 ? vshard.data<float>() : s.master.data<float>();
        auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
          const std::int64_t off = l.offsets[i];
          optim::lamb_apply(master + off, g + off, s.m.data<float>() + off, s.v.data<float>() + off,
                            static_cast<std::size_t>(l.params[i]->shape.numel()),
                            l.params[i]->decay ? h : h0, grad_scale, /*step_size=*/lr, coeffs_[k],
                            p16 ? p16 + off : nullptr, pd);
          optim::OneBitLambScalars* sc = onebit_lamb_scalars(s, l, i);
          sc->coeff_freeze = static_cast<float>(
              optim::onebit_lamb_coeff_average(h_, sc->coeff_freeze, coeffs_[k]));
        }
        // The fresh second moment starts from v as it stands after update freeze_step.
        if (step == h_.freeze_step)
          std::memcpy(s.factored.data<float>(), s.v.data<float>(),
                      static_cast<std::size_t>(l.hi - l.lo) * sizeof(float));
      });
}

void OneBitLambStep::compressed(nn::ParamStore& store, OptimizerStateStore& states,
                                const ShardReductions& red, double lr, float grad_scale) {
  const DType pd = store.options().param_dtype;
  const TensorOptions work = store.options().memory.with(Category::workspace);
  // This step's momenta before the gradient goes in, and the fused tensor that is exchanged.
  const Tensor last = Tensor::empty(Shape{fused_numel_}, DType::f32, work);
  const Tensor fused = Tensor::empty(Shape{fused_numel_}, DType::f32, work);
  float* const m_last = last.data<float>();
  float* const flat = fused.data<float>();
  std::vector<UnitOptimizerState*> held;
  auto release_all = [&] {
    for (std::size_t u = 0; u < held.size(); ++u) states.release(u, true);
  };
  coeffs_.assign(num_params_, 1.0);
  try {
    for (std::size_t u = 0; u < store.num_units(); ++u) held.push_back(&states.acquire(u));
    // The first compressed update fixes each momentum's scaling so that all have one RMS.
    const std::size_t first = errors_unit_;  // the first unit with parameters
    if (first < store.num_units() &&
        onebit_lamb_scalars(*held[first], store.layout(first), 0)->scaling == 0.0f) {
      std::vector<double> rms;
      for (std::size_t u = 0; u < store.num_units(); ++u) {
        const nn::UnitLayout& l = store.layout(u);
        const float* m = held[u]->m.data<float>();
        for (std::size_t i = 0; i < l.params.size(); ++i) {
          const auto n = static_cast<std::size_t>(l.params[i]->shape.numel());
          double ss = 0;
          for (std::size_t e = 0; e < n; ++e)
            ss += static_cast<double>(m[l.offsets[i] + e]) * m[l.offsets[i] + e];
          rms.push_back(n > 0 ? std::sqrt(ss) / std::sqrt(static_cast<double>(n)) : 0.0);
        }
      }
      double united = 0;
      for (double r : rms) united += r;
      united /= static_cast<double>(rms.size());
      std::size_t q = 0;
      for (std::size_t u = 0; u < store.num_units(); ++u)
        for (std::size_t i = 0; i < store.layout(u).params.size(); ++i, ++q)
          // A momentum of zeros (or all of them zero) keeps scaling 1, where DeepSpeed divides by
          // 0.
          onebit_lamb_scalars(*held[u], store.layout(u), i)->scaling =
              rms[q] > 0 && united > 0 ? static_cast<float>(united / rms[q]) : 1.0f;
    }
    store.expect_grad_shards_in_order();
    std::int64_t at = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      UnitOptimizerState& s = *held[u];
      const nn::UnitLayout& l = store.layout(u);
      Tensor keep;
      const nn::GradShardScope g(store, u, false);
      const float* grad = f32_grad(store, u, g.get(), keep);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        const auto n = static_cast<std::size_t>(l.params[i]->shape.numel());
        const std::int64_t off = l.offsets[i];
        optim::onebit_lamb_momentum(s.m.data<float>() + off, m_last + at + off, grad + off, n, h_,
                                    grad_scale, onebit_lamb_scalars(s, l, i)->scaling);
      }
      std::memcpy(flat + at, s.m.data<float>(), static_cast<std::size_t>(l.numel) * sizeof(float));
      at += l.numel;
    }
    if (red.ranks > 1) {
      float* errors = held[errors_unit_]->errors.data<float>();  // Trainer::error_slots
      const auto n = static_cast<std::size_t>(fused_numel_);
      const optim::ErrorFeedbackTensor t{flat, n, errors,
                                         errors + optim::onebit_padded_size(n, red.ranks)};
      red.compressed_average(std::span<const optim::ErrorFeedbackTensor>(&t, 1));
    }
    store.expect_value_shards_in_order();
    at = 0;
    std::size_t k = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      UnitOptimizerState& s = *held[u];
      const nn::UnitLayout& l = store.layout(u);
      std::memcpy(s.m.data<float>(), flat + at, static_cast<std::size_t>(l.numel) * sizeof(float));
      const nn::ValueShardScope v(store, u, /*dirty=*/true);
      float* master = pd == DType::f32 ? v.get().data<float>() : s.master.data<float>();
      auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(v.get().raw());
      for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
        const auto n = static_cast<std::size_t>(l.params[i]->shape.numel());
        const std::int64_t off = l.offsets[i];
        const double wd = onebit_lamb_decay(h_, *l.params[i]);
        optim::OneBitLambScalars* sc = onebit_lamb_scalars(s, l, i);
        const optim::OneBitLambSums sums = optim::onebit_lamb_after_exchange(
            s.m.data<float>() + off, m_last + at + off, s.v.data<float>() + off,
            s.factored.data<float>() + off, master + off, n, h_, wd, sc->scaling);
        const double factor = optim::onebit_lamb_factor(h_, wd, sums, sc->last_factor);
        sc->last_factor = static_cast<float>(factor);
        coeffs_[k] = static_cast<double>(sc->coeff_freeze) * factor;
        optim::onebit_lamb_apply(master + off, s.m.data<float>() + off, s.v.data<float>() + off, n,
                                 h_, wd, lr * coeffs_[k], p16 ? p16 + off : nullptr, pd);
      }
      at += l.numel;
    }
  } catch (...) {
    release_all();
    throw;
  }
  release_all();
}

}  // namespace strata::train
