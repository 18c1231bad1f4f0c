#include "framework/optim/optimizers/onebit_lamb.hpp"

#include <cmath>
#include <cstring>

#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/cuda_refusal.hpp"
#include "framework/train/grad_view.hpp"

namespace strata::optim {

namespace {

// The state tensors, in declaration order.
constexpr std::size_t kObM = 0, kObV = 1, kObVFresh = 2, kObScalars = 3, kObErrors = 4;

Declaration onebit_lamb_declaration() {
  Declaration d;
  d.name = "OneBitLamb";
  d.checkpoint_name = "onebitlamb";
  d.state = {StateTensor::elements("exp_avg"), StateTensor::elements("exp_avg_sq"),
             StateTensor::elements("exp_avg_sq_fresh"),
             StateTensor::per_param("onebit_lamb_scalars",
                                    static_cast<std::int64_t>(kOneBitLambScalars), "onebit_lamb"),
             StateTensor::rank_errors("compression_errors", /*fused=*/true)};
  d.shard_sums = true;
  d.compressed_exchange = true;
  d.refusals.zero =
      "DeepSpeed refuses it too: the compressed momentum exchange needs every rank to hold whole "
      "tensors";
  d.refusals.model_parallel =
      "the compressed momentum exchange averages whole tensors over the data-parallel ranks";
  d.refusals.gpu = kNoCudaKernels;
  return d;
}

OneBitLambScalars* onebit_lamb_scalars(train::UnitOptimizerState& s, std::size_t i) {
  static_assert(sizeof(OneBitLambScalars) == kOneBitLambScalars * sizeof(float));
  return reinterpret_cast<OneBitLambScalars*>(s[kObScalars].data<float>() + kOneBitLambScalars * i);
}

double onebit_lamb_decay(const OneBitLambHyper& h, const nn::Parameter& p) {
  return p.decay ? h.weight_decay : 0.0;  // only parameters with >= 2 dims, as AdamW
}

}  // namespace

OneBitLamb::OneBitLamb(const OneBitLambHyper& h) : Optimizer(onebit_lamb_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> OneBitLamb::from_config(const config::Optimizer& c) {
  OneBitLambHyper h;
  adam_family_from_config(h, c);
  h.max_coeff = c.params.number("max_coeff");
  h.min_coeff = c.params.number("min_coeff");
  h.freeze_step = c.params.integer("freeze_step");
  h.coeff_beta = c.params.number("coeff_beta");
  h.factor_max = c.params.number("factor_max");
  h.factor_min = c.params.number("factor_min");
  h.factor_threshold = c.params.number("factor_threshold");
  return std::make_shared<OneBitLamb>(h);
}

void OneBitLamb::to_config(config::Optimizer& out) const {
  // bias_correction and eps_inside_sqrt false: the only values it takes.
  out = config::Optimizer("OneBitLamb");
  adam_family_to_config(h_, out);
  out.params.set("max_coeff", h_.max_coeff);
  out.params.set("min_coeff", h_.min_coeff);
  out.params.set("freeze_step", h_.freeze_step);
  out.params.set("coeff_beta", h_.coeff_beta);
  out.params.set("factor_max", h_.factor_max);
  out.params.set("factor_min", h_.factor_min);
  out.params.set("factor_threshold", h_.factor_threshold);
}

void OneBitLamb::bind(const nn::ParamStore& store, int) {
  validate(h_);
  num_params_ = 0;
  fused_numel_ = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& l = store.layout(u);
    STRATA_CHECK(l.lo == 0 && l.hi >= l.numel, "train",
                 "1-bit LAMB needs every unit whole (ZeRO stage 0): unit {} owns [{}, {})", u, l.lo,
                 l.hi);
    num_params_ += l.params.size();
    fused_numel_ += l.numel;
  }
  errors_unit_ = 0;
  while (errors_unit_ < store.num_units() && store.layout(errors_unit_).params.empty())
    ++errors_unit_;
}

double OneBitLamb::step(StepContext& ctx, const StepArgs& a) {
  if (ctx.meta()) {
    // The compressed step holds two copies of the momenta.
    if (h_.frozen(a.step)) meta_pass(ctx, {fused_numel_, fused_numel_});
    else meta_pass(ctx);
  } else if (h_.frozen(a.step)) {
    compressed(ctx, a.lr, a.grad_scale);
  } else {
    warmup(ctx, a.step, a.lr, a.grad_scale);
  }
  return a.lr;
}

void OneBitLamb::warmup(StepContext& ctx, std::int64_t step, double lr, float grad_scale) {
  nn::ParamStore& store = ctx.store;
  const DType pd = store.options().param_dtype;
  LambHyper h = onebit_lamb_warmup_hyper(h_), h0 = h;
  h.lr = h0.lr = lr;
  h0.weight_decay = 0;
  // [sum p², sum u²] per parameter; units are whole, so the sum over shards adds nothing.
  std::vector<double> sums(2 * num_params_, 0.0);
  std::size_t k = 0;
  train::for_each_unit_grads(
      store, ctx.states, false, [&](std::size_t u, train::UnitOptimizerState& s, const float* g) {
        const ValueSlice held(store, ctx.staging, u, false);
        const float* master = pd == DType::f32 ? held.get().data<float>() : s.master.data<float>();
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
          const std::int64_t off = l.offsets[i];
          const LambSums ls = lamb_sums(
              master + off, g + off, s[kObM].data<float>() + off, s[kObV].data<float>() + off,
              static_cast<std::size_t>(l.params[i]->shape.numel()), l.params[i]->decay ? h : h0,
              grad_scale);
          sums[2 * k] = ls.param_sq;
          sums[2 * k + 1] = ls.update_sq;
        }
      });
  ctx.red.sum_vector(sums);
  coeffs_.assign(num_params_, 1.0);
  for (std::size_t q = 0; q < num_params_; ++q)
    coeffs_[q] = lamb_trust_ratio(h, sums[2 * q], sums[2 * q + 1]);
  k = 0;
  train::for_each_unit_grads(
      store, ctx.states, true, [&](std::size_t u, train::UnitOptimizerState& s, const float* g) {
        ValueSlice held(store, ctx.staging, u, /*dirty=*/true);
        const Tensor& vshard = held.get();
        float* master = pd == DType::f32 ? vshard.data<float>() : s.master.data<float>();
        auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
          const std::int64_t off = l.offsets[i];
          lamb_apply(master + off, g + off, s[kObM].data<float>() + off, s[kObV].data<float>() + off,
                     static_cast<std::size_t>(l.params[i]->shape.numel()),
                     l.params[i]->decay ? h : h0, grad_scale, /*step_size=*/lr, coeffs_[k],
                     p16 ? p16 + off : nullptr, pd);
          OneBitLambScalars* sc = onebit_lamb_scalars(s, i);
          sc->coeff_freeze =
              static_cast<float>(onebit_lamb_coeff_average(h_, sc->coeff_freeze, coeffs_[k]));
        }
        // The fresh second moment starts from v as it stands after update freeze_step.
        if (step == h_.freeze_step)
          std::memcpy(s[kObVFresh].data<float>(), s[kObV].data<float>(),
                      static_cast<std::size_t>(l.hi - l.lo) * sizeof(float));
        held.finish();
      });
}

void OneBitLamb::compressed(StepContext& ctx, double lr, float grad_scale) {
  nn::ParamStore& store = ctx.store;
  train::OptimizerStateStore& states = ctx.states;
  const DType pd = store.options().param_dtype;
  const TensorOptions work = store.options().memory.with(Category::workspace);
  // This step's momenta before the gradient goes in, and the fused tensor that is exchanged.
  const Tensor last = Tensor::empty(Shape{fused_numel_}, DType::f32, work);
  const Tensor fused = Tensor::empty(Shape{fused_numel_}, DType::f32, work);
  float* const m_last = last.data<float>();
  float* const flat = fused.data<float>();
  std::vector<train::UnitOptimizerState*> held;
  auto release_all = [&] {
    for (std::size_t u = 0; u < held.size(); ++u) states.release(u, true);
  };
  coeffs_.assign(num_params_, 1.0);
  try {
    for (std::size_t u = 0; u < store.num_units(); ++u) held.push_back(&states.acquire(u));
    // The first compressed update fixes each momentum's scaling so that all have one RMS.
    const std::size_t first = errors_unit_;  // the first unit with parameters
    if (first < store.num_units() && onebit_lamb_scalars(*held[first], 0)->scaling == 0.0f) {
      std::vector<double> rms;
      for (std::size_t u = 0; u < store.num_units(); ++u) {
        const nn::UnitLayout& l = store.layout(u);
        const float* m = (*held[u])[kObM].data<float>();
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
          onebit_lamb_scalars(*held[u], i)->scaling =
              rms[q] > 0 && united > 0 ? static_cast<float>(united / rms[q]) : 1.0f;
    }
    store.expect_grad_shards_in_order();
    std::int64_t at = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      train::UnitOptimizerState& s = *held[u];
      const nn::UnitLayout& l = store.layout(u);
      Tensor keep;
      const nn::GradShardScope g(store, u, false);
      const float* grad = train::f32_grad(store, u, g.get(), keep);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        const auto n = static_cast<std::size_t>(l.params[i]->shape.numel());
        const std::int64_t off = l.offsets[i];
        onebit_lamb_momentum(s[kObM].data<float>() + off, m_last + at + off, grad + off, n, h_,
                             grad_scale, onebit_lamb_scalars(s, i)->scaling);
      }
      std::memcpy(flat + at, s[kObM].data<float>(), static_cast<std::size_t>(l.numel) * sizeof(float));
      at += l.numel;
    }
    if (ctx.red.ranks > 1) {
      float* errors = (*held[errors_unit_])[kObErrors].data<float>();  // optim::error_slots
      const auto n = static_cast<std::size_t>(fused_numel_);
      const ErrorFeedbackTensor t{flat, n, errors, errors + onebit_padded_size(n, ctx.red.ranks)};
      ctx.red.compressed_average(std::span<const ErrorFeedbackTensor>(&t, 1));
    }
    store.expect_value_shards_in_order();
    at = 0;
    std::size_t k = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      train::UnitOptimizerState& s = *held[u];
      const nn::UnitLayout& l = store.layout(u);
      std::memcpy(s[kObM].data<float>(), flat + at, static_cast<std::size_t>(l.numel) * sizeof(float));
      ValueSlice v(store, ctx.staging, u, /*dirty=*/true);
      float* master = pd == DType::f32 ? v.get().data<float>() : s.master.data<float>();
      auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(v.get().raw());
      for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
        const auto n = static_cast<std::size_t>(l.params[i]->shape.numel());
        const std::int64_t off = l.offsets[i];
        const double wd = onebit_lamb_decay(h_, *l.params[i]);
        OneBitLambScalars* sc = onebit_lamb_scalars(s, i);
        const OneBitLambSums sums = onebit_lamb_after_exchange(
            s[kObM].data<float>() + off, m_last + at + off, s[kObV].data<float>() + off,
            s[kObVFresh].data<float>() + off, master + off, n, h_, wd, sc->scaling);
        const double factor = onebit_lamb_factor(h_, wd, sums, sc->last_factor);
        sc->last_factor = static_cast<float>(factor);
        coeffs_[k] = static_cast<double>(sc->coeff_freeze) * factor;
        onebit_lamb_apply(master + off, s[kObM].data<float>() + off, s[kObV].data<float>() + off, n,
                          h_, wd, lr * coeffs_[k], p16 ? p16 + off : nullptr, pd);
      }
      v.finish();
      at += l.numel;
    }
  } catch (...) {
    release_all();
    throw;
  }
  release_all();
}

}  // namespace strata::optim
