#include "framework/optim/optimizers/onebit_lamb.hpp"

#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/cuda_refusal.hpp"
#include "framework/optim/optimizers/step_sums.hpp"
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

// [off, off + n) of a flat tensor (undefined stays undefined).
Tensor part(const Tensor& t, std::int64_t off, std::int64_t n) {
  return t.defined() ? t.slice(0, off, off + n) : Tensor();
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

std::shared_ptr<const Optimizer> make_onebit_lamb(const config::Optimizer& c) {
  return OneBitLamb::from_config(c);
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

// Every per-element pass is an ops:: entry (lamb_sums, lamb_apply: LAMB's own); the scalars of
// each parameter are kept on the host.
void OneBitLamb::warmup(StepContext& ctx, std::int64_t step, double lr, float grad_scale) {
  nn::ParamStore& store = ctx.store;
  const DType pd = store.options().param_dtype;
  LambHyper h = onebit_lamb_warmup_hyper(h_), h0 = h;
  h.lr = h0.lr = lr;
  h0.weight_decay = 0;
  // [sum p², sum u²] per parameter; units are whole, so the sum over shards adds nothing.
  StepSums sums(update_device(ctx.states.tier(), store.options().memory.device), 2 * num_params_,
                store.options().memory.with(Category::workspace));
  std::size_t k = 0;
  train::for_each_unit_grad_tensors(
      store, ctx.states, false, [&](std::size_t u, train::UnitOptimizerState& s, const Tensor& g) {
        const ValueSlice held(store, ctx.staging, u, false);
        const Tensor master = pd == DType::f32 ? held.get() : s.master;
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
          const std::int64_t off = l.offsets[i], n = l.params[i]->shape.numel();
          ops::lamb_sums(part(master, off, n), part(g, off, n), part(s[kObM], off, n),
                         part(s[kObV], off, n), l.params[i]->decay ? h : h0, grad_scale,
                         sums.slice(2 * k, 2));
        }
      });
  sums.reduce(ctx.red, /*back=*/false);
  coeffs_.assign(num_params_, 1.0);
  for (std::size_t q = 0; q < num_params_; ++q)
    coeffs_[q] = lamb_trust_ratio(h, sums.host()[2 * q], sums.host()[2 * q + 1]);
  k = 0;
  train::for_each_unit_grad_tensors(
      store, ctx.states, true, [&](std::size_t u, train::UnitOptimizerState& s, const Tensor& g) {
        ValueSlice held(store, ctx.staging, u, /*dirty=*/true);
        const Tensor& vshard = held.get();
        const Tensor master = pd == DType::f32 ? vshard : s.master;
        const Tensor p16 = pd == DType::f32 ? Tensor() : vshard;
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
          const std::int64_t off = l.offsets[i], n = l.params[i]->shape.numel();
          ops::lamb_apply(part(master, off, n), part(g, off, n), part(s[kObM], off, n),
                          part(s[kObV], off, n), l.params[i]->decay ? h : h0, grad_scale,
                          /*step_size=*/lr, coeffs_[k], part(p16, off, n));
          OneBitLambScalars* sc = onebit_lamb_scalars(s, i);
          sc->coeff_freeze =
              static_cast<float>(onebit_lamb_coeff_average(h_, sc->coeff_freeze, coeffs_[k]));
        }
        // The fresh second moment starts from v as it stands after update freeze_step.
        if (step == h_.freeze_step) s[kObVFresh].copy_from(s[kObV]);
        held.finish();
      });
}

// Every per-element pass is an ops:: entry (onebit_lamb_sumsq, _momentum, _after_exchange,
// _apply; the copies into and out of the fused tensor are tensor copies); the exchange reads and
// writes the fused momenta and this rank's errors in host memory (the engine's
// compressed_average); each parameter's scalars and factor are computed on the host from its sums.
void OneBitLamb::compressed(StepContext& ctx, double lr, float grad_scale) {
  nn::ParamStore& store = ctx.store;
  train::OptimizerStateStore& states = ctx.states;
  const DType pd = store.options().param_dtype;
  const TensorOptions work = store.options().memory.with(Category::workspace);
  const Device where = update_device(states.tier(), store.options().memory.device);
  // This step's momenta before the gradient goes in, and the fused tensor that is exchanged.
  const Tensor last = Tensor::empty(Shape{fused_numel_}, DType::f32, work);
  const Tensor fused = Tensor::empty(Shape{fused_numel_}, DType::f32, work);
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
      StepSums ss(where, num_params_, work);
      std::vector<std::int64_t> numel;
      for (std::size_t u = 0; u < store.num_units(); ++u) {
        const nn::UnitLayout& l = store.layout(u);
        for (std::size_t i = 0; i < l.params.size(); ++i) {
          const std::int64_t n = l.params[i]->shape.numel();
          ops::onebit_lamb_sumsq(part((*held[u])[kObM], l.offsets[i], n),
                                 ss.slice(numel.size(), 1));
          numel.push_back(n);
        }
      }
      ss.fetch();
      std::vector<double> rms;
      for (std::size_t q = 0; q < numel.size(); ++q)
        rms.push_back(numel[q] > 0 ? std::sqrt(ss.host()[q]) /
                                         std::sqrt(static_cast<double>(numel[q]))
                                   : 0.0);
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
      const Tensor grad = train::f32_grad_tensor(store, u, g.get(), keep);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        const std::int64_t off = l.offsets[i], n = l.params[i]->shape.numel();
        ops::onebit_lamb_momentum(part(s[kObM], off, n), part(last, at + off, n),
                                  part(grad, off, n), h_, grad_scale,
                                  onebit_lamb_scalars(s, i)->scaling);
      }
      part(fused, at, l.numel).copy_from(part(s[kObM], 0, l.numel));
      at += l.numel;
    }
    if (ctx.red.ranks > 1) {
      float* errors = (*held[errors_unit_])[kObErrors].data<float>();  // optim::error_slots
      const auto n = static_cast<std::size_t>(fused_numel_);
      const ErrorFeedbackTensor t{fused.data<float>(), n, errors,
                                  errors + onebit_padded_size(n, ctx.red.ranks)};
      ctx.red.compressed_average(std::span<const ErrorFeedbackTensor>(&t, 1));
    }
    store.expect_value_shards_in_order();
    at = 0;
    std::size_t k = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      train::UnitOptimizerState& s = *held[u];
      const nn::UnitLayout& l = store.layout(u);
      part(s[kObM], 0, l.numel).copy_from(part(fused, at, l.numel));
      ValueSlice v(store, ctx.staging, u, /*dirty=*/true);
      const Tensor master = pd == DType::f32 ? v.get() : s.master;
      const Tensor p16 = pd == DType::f32 ? Tensor() : v.get();
      // Each parameter's sums [prelim², u², denominator ratio], then its factor and update (a
      // parameter's update reads no other parameter's elements, so the sums of all come first).
      StepSums sums(where, 3 * l.params.size(), work);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        const std::int64_t off = l.offsets[i], n = l.params[i]->shape.numel();
        ops::onebit_lamb_after_exchange(part(s[kObM], off, n), part(last, at + off, n),
                                        part(s[kObV], off, n), part(s[kObVFresh], off, n),
                                        part(master, off, n), h_,
                                        onebit_lamb_decay(h_, *l.params[i]),
                                        onebit_lamb_scalars(s, i)->scaling, sums.slice(3 * i, 3));
      }
      sums.fetch();
      for (std::size_t i = 0; i < l.params.size(); ++i, ++k) {
        const std::int64_t off = l.offsets[i], n = l.params[i]->shape.numel();
        const double wd = onebit_lamb_decay(h_, *l.params[i]);
        OneBitLambScalars* sc = onebit_lamb_scalars(s, i);
        const OneBitLambSums ps{sums.host()[3 * i], sums.host()[3 * i + 1],
                                sums.host()[3 * i + 2]};
        const double factor = onebit_lamb_factor(h_, wd, ps, sc->last_factor);
        sc->last_factor = static_cast<float>(factor);
        coeffs_[k] = static_cast<double>(sc->coeff_freeze) * factor;
        ops::onebit_lamb_apply(part(master, off, n), part(s[kObM], off, n), part(s[kObV], off, n),
                               h_, wd, lr * coeffs_[k], part(p16, off, n));
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
