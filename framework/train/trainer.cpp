#include "framework/train/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "framework/backend/ops/ops.hpp"

namespace strata::train {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

Trainer::Trainer(nn::ParamStore& store, const TrainerOptions& opts, ShardReductions reductions,
                 std::unique_ptr<OptimizerStateStore> states)
    : store_(store), opts_(opts), red_(std::move(reductions)), states_(std::move(states)) {
  const double base_lr = opts.optimizer == OptimizerKind::adamw ? opts.adamw.lr : opts.sgd.lr;
  if (opts.optimizer == OptimizerKind::adamw) optim::validate(opts.adamw);
  else optim::validate(opts.sgd);
  schedule_ = optim::make_schedule(opts.schedule, base_lr);
  if (opts.precision == Precision::fp16)
    scaler_ = precision::make_loss_scaler(opts.static_loss_scale, opts.dynamic_scaler);
  const DType pd = store.options().param_dtype;
  STRATA_CHECK(store.options().grad_dtype == pd, "train",
               "gradients ({}) must have the parameters' dtype ({})",
               dtype_name(store.options().grad_dtype), dtype_name(pd));
  if (!states_) states_ = make_memory_state_store(store.options().memory);
  store.expect_value_shards_in_order();
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    StateLayout l;
    l.elements = store.layout(u).hi - store.layout(u).lo;
    l.master = pd != DType::f32;
    l.second_moment = opts.optimizer == OptimizerKind::adamw;
    const nn::ValueShardScope values(store, u, false);  // released even if create throws
    states_->create(u, l, values.get());
  }
}

float Trainer::loss_scale() const { return scaler_ ? static_cast<float>(scaler_->scale()) : 1.0f; }

double Trainer::current_lr() const { return schedule_->lr_for_update(updates_ + 1); }

Tensor Trainer::master_shard(std::size_t u) const {
  const TensorOptions host = store_.options().memory.with(Tier::host).with(Category::other);
  UnitOptimizerState& s = states_->acquire(u);
  Tensor out;
  {
    const nn::ValueShardScope values(store_, u, false);
    out = (s.master.defined() ? s.master : values.get()).to(DType::f32, host);
  }
  states_->release(u, false);
  return out;
}

namespace {
// Elements of the owned slice that hold parameters (the padded tail holds none).
std::size_t owned_numel(const nn::UnitLayout& l) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(l.hi, l.numel) - l.lo));
}
}  // namespace

double Trainer::grad_sum_squares(std::size_t u) const {
  const auto n = static_cast<std::int64_t>(owned_numel(store_.layout(u)));
  return n > 0 ? ops::sum_squares(store_.grad_shard(u).slice(0, 0, n)) : 0.0;
}

bool Trainer::grads_overflow() const {
  bool any = false;
  for (std::size_t u = 0; u < store_.num_units() && !any; ++u) {
    const auto n = static_cast<std::int64_t>(owned_numel(store_.layout(u)));
    any = n > 0 && ops::has_inf_or_nan(store_.grad_shard(u).slice(0, 0, n));
  }
  return red_.any(any);
}

StepResult Trainer::step() {
  StepResult r;
  r.loss_scale = loss_scale();
  if (scaler_ && grads_overflow()) {
    r.applied = false;
    r.grad_norm = std::numeric_limits<double>::infinity();
    r.lr = current_lr();
    scaler_->update(true);  // throws when stuck at the minimum scale
    store_.zero_grads();
    return r;
  }
  double ss = 0;
  for (std::size_t u = 0; u < store_.num_units(); ++u) ss += grad_sum_squares(u);
  ss = red_.sum(ss);
  const double inv_scale = 1.0 / r.loss_scale;
  r.grad_norm = std::sqrt(ss) * inv_scale;
  double coef = 1.0;
  if (opts_.max_grad_norm > 0) {
    // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied only when < 1.
    const double c = opts_.max_grad_norm / (r.grad_norm + 1e-6);
    if (c < 1.0) coef = c;
  }
  const float grad_scale = static_cast<float>(coef * inv_scale);
  const std::int64_t k = updates_ + 1;
  r.lr = schedule_->lr_for_update(k);
  const DType pd = store_.options().param_dtype;
  states_->begin_step();
  store_.expect_value_shards_in_order();
  for (std::size_t u = 0; u < store_.num_units(); ++u) {
    const nn::UnitLayout& l = store_.layout(u);
    UnitOptimizerState& s = states_->acquire(u);
    const nn::ValueShardScope held(store_, u, /*dirty=*/true);  // written back when released
    const Tensor& vshard = held.get();
    const Tensor master = pd == DType::f32 ? vshard : s.master;
    const Tensor g = store_.grad_shard(u);
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      // The part of parameter i inside the owned range, as offsets into the owned slice.
      const std::int64_t a = std::max(l.lo, l.offsets[i]);
      const std::int64_t b = std::min(l.hi, l.offsets[i] + l.params[i]->shape.numel());
      if (a >= b) continue;
      const std::int64_t lo = a - l.lo, hi = b - l.lo;
      auto part = [&](const Tensor& t) { return t.defined() ? t.slice(0, lo, hi) : Tensor(); };
      const Tensor p16 = pd == DType::f32 ? Tensor() : part(vshard);
      // Weight decay only on parameters with >= 2 dims (declared `decay`).
      const bool decay = l.params[i]->decay;
      if (opts_.optimizer == OptimizerKind::adamw) {
        optim::AdamWHyper h = opts_.adamw;
        h.lr = r.lr;
        if (!decay) h.weight_decay = 0;
        ops::adamw_step(part(master), part(g), part(s.m), part(s.v), h, k, grad_scale, p16);
      } else {
        optim::SGDHyper h = opts_.sgd;
        h.lr = r.lr;
        if (!decay) h.weight_decay = 0;
        ops::sgd_step(part(master), part(g), part(s.m), h, k, grad_scale, p16);
      }
    }
    states_->release(u, true);
  }
  states_->end_step();
  // Offloaded parameter slices: this step's write-backs are complete (or their error thrown).
  if (const auto& vs = store_.options().value_store) vs->flush();
  if (scaler_) scaler_->update(false);
  store_.zero_grads();
  ++updates_;
  return r;
}

}  // namespace strata::train
