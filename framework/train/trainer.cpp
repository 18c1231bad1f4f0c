#include "framework/train/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "framework/optim/adamw8bit.hpp"
#include "framework/train/adafactor_step.hpp"
#include "framework/train/grad_view.hpp"
#include "framework/train/lamb_step.hpp"
#include "framework/train/onebit_lamb_step.hpp"

namespace strata::train {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::adamw: return "AdamW";
    case OptimizerKind::sgd: return "SGD";
    case OptimizerKind::adamw8bit: return "AdamW8bit";
    case OptimizerKind::adafactor: return "Adafactor";
    case OptimizerKind::lamb: return "Lamb";
    case OptimizerKind::onebit_adam: return "OneBitAdam";
    case OptimizerKind::onebit_lamb: return "OneBitLamb";
  }
  return "?";
}

int state_pad_multiple(const TrainerOptions& o, int shard_count) {
  return o.optimizer == OptimizerKind::adamw8bit
             ? static_cast<int>(optim::kQuantBlock) * std::max(shard_count, 1)
             : 1;
}

namespace {
// The padding after the parameters in an owned slice acquired to be overwritten: the update
// writes only [0, owned), so the rest is set to zeros as a read slice would hold.
void zero_padding(const Tensor& shard, std::size_t owned) {
  const auto n = static_cast<std::int64_t>(owned);
  if (!shard.device().is_meta() && n < shard.numel()) shard.slice(0, n, shard.numel()).zero();
}

double base_lr(const TrainerOptions& o) {
  switch (o.optimizer) {
    case OptimizerKind::sgd: return o.sgd.lr;
    case OptimizerKind::adafactor: return o.adafactor.lr;
    case OptimizerKind::lamb: return o.lamb.lr;
    case OptimizerKind::onebit_adam: return o.onebit.lr;
    case OptimizerKind::onebit_lamb: return o.onebit_lamb.lr;
    default: return o.adamw.lr;
  }
}
}  // namespace

Trainer::Trainer(nn::ParamStore& store, const TrainerOptions& opts, ShardReductions reductions,
                 std::unique_ptr<OptimizerStateStore> states)
    : store_(store), opts_(opts), red_(std::move(reductions)), states_(std::move(states)) {
  switch (opts.optimizer) {
    case OptimizerKind::sgd: optim::validate(opts.sgd); break;
    case OptimizerKind::adafactor: adafactor_ = std::make_unique<AdafactorStep>(store, opts.adafactor); break;
    case OptimizerKind::lamb: lamb_ = std::make_unique<LambStep>(store, opts.lamb); break;
    case OptimizerKind::onebit_adam:
      optim::validate(opts.onebit);
      STRATA_CHECK(red_.ranks == 1 || red_.compressed_average, "train",
                   "1-bit Adam on {} ranks needs ShardReductions::compressed_average", red_.ranks);
      break;
    case OptimizerKind::onebit_lamb:
      onebit_lamb_ = std::make_unique<OneBitLambStep>(store, opts.onebit_lamb);
      STRATA_CHECK(red_.ranks == 1 || red_.compressed_average, "train",
                   "1-bit LAMB on {} ranks needs ShardReductions::compressed_average", red_.ranks);
      break;
    default: optim::validate(opts.adamw);
  }
  schedule_ = optim::make_schedule(opts.schedule, base_lr(opts));
  if (opts.precision == Precision::fp16)
    scaler_ = precision::make_loss_scaler(opts.static_loss_scale, opts.dynamic_scaler);
  const DType pd = store.options().param_dtype;
  STRATA_CHECK(store.options().grad_dtype == pd, "train",
               "gradients ({}) must have the parameters' dtype ({})",
               dtype_name(store.options().grad_dtype), dtype_name(pd));
  if (!states_) states_ = make_memory_state_store(store.options().memory);
  store.expect_value_shards_in_order();
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& ul = store.layout(u);
    StateLayout l;
    l.elements = ul.hi - ul.lo;
    l.master = pd != DType::f32;
    switch (opts.optimizer) {
      case OptimizerKind::adamw:
      case OptimizerKind::lamb: break;  // m and v over the owned slice
      case OptimizerKind::onebit_adam:
        STRATA_CHECK(ul.lo == 0 && ul.hi >= ul.numel, "train",
                     "1-bit Adam needs every unit whole (ZeRO stage 0): unit {} owns [{}, {})", u,
                     ul.lo, ul.hi);
        for (const ErrorSlots& e : error_slots(u)) l.errors += e.size;
        break;
      case OptimizerKind::onebit_lamb:  // wholeness checked by OneBitLambStep
        l.factored = OneBitLambStep::factored_size(ul);
        for (const ErrorSlots& e : error_slots(u)) l.errors += e.size;
        break;
      case OptimizerKind::sgd: l.second_moment = false; break;
      case OptimizerKind::adamw8bit: {
        const auto blk = static_cast<std::int64_t>(optim::kQuantBlock);
        STRATA_CHECK(ul.lo % blk == 0 && l.elements % blk == 0, "train",
                     "AdamW8bit: unit {} owns [{}, {}), not whole {}-element quantization blocks; "
                     "build the ParamStore with pad_multiple = train::state_pad_multiple(options, "
                     "shard count)", u, ul.lo, ul.hi, blk);
        l.first_moment = l.second_moment = false;
        l.quantized = true;
        break;
      }
      case OptimizerKind::adafactor:
        l.first_moment = opts.adafactor.has_beta1();
        l.second_moment = false;
        l.packed_second_moment = adafactor_->packed_v_size(u);
        l.factored = adafactor_->factored_size(u);
        break;
    }
    const nn::ValueShardScope values(store, u, false);  // released even if create throws
    states_->create(u, l, values.get());
  }
  if (opts.step_in_backward) {
    STRATA_CHECK(opts.optimizer == OptimizerKind::adamw || opts.optimizer == OptimizerKind::adamw8bit ||
                     opts.optimizer == OptimizerKind::sgd,
                 "train", "updating units in backward is implemented for AdamW, AdamW8bit and SGD, "
                 "not {}", optimizer_name(opts.optimizer));
    STRATA_CHECK(opts.max_grad_norm <= 0 && !scaler_, "train",
                 "updating units in backward needs no gradient clipping and no fp16 loss scaling "
                 "(both need every gradient before the first update)");
    // Backward completes the units' gradients last to first.
    for (std::size_t u = store.num_units(); u-- > 0;) step_order_.push_back(u);
    states_->expect_order(step_order_);
  }
}

Trainer::~Trainer() = default;

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

double Trainer::grad_sum_squares(std::size_t u) const {
  if (owned_numel(store_.layout(u)) == 0) return 0.0;
  const nn::GradShardScope g(store_, u, false);  // offloaded gradients: read from their store
  return grad_sum_squares_of(u, g.get());
}

void Trainer::note_final_gradient(std::size_t u, const Tensor& owned) {
  if (noted_ss_.size() != store_.num_units()) noted_ss_.assign(store_.num_units(), std::nullopt);
  noted_ss_.at(u) = grad_sum_squares_of(u, owned);
}

void Trainer::forget_final_gradients() { noted_ss_.assign(noted_ss_.size(), std::nullopt); }

double Trainer::grad_sum_squares_of(std::size_t u, const Tensor& owned) const {
  const nn::UnitLayout& l = store_.layout(u);
  const auto n = static_cast<std::int64_t>(owned_numel(l));
  if (n <= 0) return 0.0;
  if (red_.count_replicated) return ops::sum_squares(owned.slice(0, 0, n));
  // Only the split parameters' parts of the owned slice [lo, lo + n).
  double ss = 0.0;
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    if (!l.params[i]->placement.split()) continue;
    const std::int64_t a = std::max(l.lo, l.offsets[i]);
    const std::int64_t b = std::min(l.lo + n, l.offsets[i] + l.params[i]->shape.numel());
    if (a < b) ss += ops::sum_squares(owned.slice(0, a - l.lo, b - l.lo));
  }
  return ss;
}

bool Trainer::grads_overflow() const {
  bool any = false;
  store_.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < store_.num_units() && !any; ++u) {
    const auto n = static_cast<std::int64_t>(owned_numel(store_.layout(u)));
    if (n == 0) continue;
    const nn::GradShardScope g(store_, u, false);
    any = ops::has_inf_or_nan(g.get().slice(0, 0, n));
  }
  return red_.any(any);
}

StepResult Trainer::step() {
  if (opts_.step_in_backward) return finish_step_in_backward();
  StepResult r;
  r.loss_scale = loss_scale();
  if (scaler_ && grads_overflow()) {
    forget_final_gradients();
    r.applied = false;
    r.grad_norm = std::numeric_limits<double>::infinity();
    r.lr = current_lr();
    scaler_->update(true);  // throws when stuck at the minimum scale
    store_.zero_grads();
    return r;
  }
  double ss = 0;
  store_.expect_grad_shards_in_order();
  const bool noted = noted_ss_.size() == store_.num_units() &&
                     std::all_of(noted_ss_.begin(), noted_ss_.end(), [](const auto& v) { return v.has_value(); });
  for (std::size_t u = 0; u < store_.num_units(); ++u) {
    // Every unit is read in order (an offloaded gradient store reads ahead in that order) unless
    // every unit's share was noted where its gradient was written; a unit another process also
    // counts (a pipeline's tied copy) is left out of the norm.
    const double s = noted ? *noted_ss_[u] : grad_sum_squares(u);
    if (counted_here(u)) ss += s;
  }
  forget_final_gradients();
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
  states_->begin_step();
  if (store_.options().memory.device.is_meta() &&
      (opts_.optimizer == OptimizerKind::adafactor || opts_.optimizer == OptimizerKind::adamw8bit ||
       opts_.optimizer == OptimizerKind::lamb ||
       (opts_.optimizer == OptimizerKind::onebit_adam && opts_.onebit.frozen(k)) ||
       opts_.optimizer == OptimizerKind::onebit_lamb)) {
    step_on_meta();
  } else if (opts_.optimizer == OptimizerKind::adafactor) {
    const double rho = adafactor_->run(store_, *states_, red_, k, r.lr, grad_scale);
    if (opts_.adafactor.relative_step) r.lr = rho;
  } else if (opts_.optimizer == OptimizerKind::lamb) {
    lamb_->run(store_, *states_, red_, k, r.lr, grad_scale);
  } else if (opts_.optimizer == OptimizerKind::onebit_lamb) {
    onebit_lamb_->run(store_, *states_, red_, k, r.lr, grad_scale);
  } else if (opts_.optimizer == OptimizerKind::onebit_adam && opts_.onebit.frozen(k)) {
    step_onebit_frozen(r.lr, grad_scale);
  } else {
    step_elementwise(k, r.lr, grad_scale);
  }
  end_update();
  return r;
}

bool Trainer::counted_here(std::size_t u) const {
  return std::find(red_.counted_elsewhere.begin(), red_.counted_elsewhere.end(), u) ==
         red_.counted_elsewhere.end();
}

void Trainer::end_update() {
  states_->end_step();
  // Offloaded parameter slices: this step's write-backs are complete (or their error thrown).
  if (const auto& vs = store_.options().value_store) vs->flush();
  if (scaler_) scaler_->update(false);
  store_.zero_grads();
  ++updates_;
}

// The memory planner's step (the meta device) for the optimizers whose kernels work on host
// pointers (AdamW8bit, Adafactor, LAMB, 1-bit Adam's frozen phase, 1-bit LAMB): nothing is
// computed, but every unit's state, parameter slice and gradient slice is acquired and released as
// a real step does, with the f32 copy of a 16-bit gradient that the kernels other than AdamW8bit's
// read (and 1-bit LAMB's two copies of the momenta), so the memory charged and the offload
// traffic are the same.
void Trainer::step_on_meta() {
  Tensor lamb_last, lamb_fused;  // 1-bit LAMB's compressed step holds two copies of the momenta
  if (opts_.optimizer == OptimizerKind::onebit_lamb && opts_.onebit_lamb.frozen(updates_ + 1)) {
    const Shape all{onebit_lamb_->fused_numel()};
    const TensorOptions work = store_.options().memory.with(Category::workspace);
    lamb_last = Tensor::empty(all, DType::f32, work);
    lamb_fused = Tensor::empty(all, DType::f32, work);
  }
  // AdamW8bit overwrites the 16-bit slice from its masters, as step_elementwise.
  const bool overwrite = opts_.optimizer == OptimizerKind::adamw8bit &&
                         store_.options().param_dtype != DType::f32;
  store_.expect_value_shards_in_order(overwrite);
  store_.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < store_.num_units(); ++u) meta_unit(u, overwrite, nullptr);
}

void Trainer::meta_unit(std::size_t u, bool overwrite, const Tensor* grad) {
  states_->acquire(u);
  const nn::ValueShardScope held(store_, u, /*dirty=*/true, overwrite);
  std::optional<nn::GradShardScope> acquired;
  if (!grad) acquired.emplace(store_, u, /*dirty=*/false);
  const Tensor& g = grad ? *grad : acquired->get();
  // The f32 copy the kernels other than AdamW8bit's (which widens block by block) read.
  if (g.dtype() != DType::f32 && opts_.optimizer != OptimizerKind::adamw8bit)
    Tensor::empty(Shape{static_cast<std::int64_t>(owned_numel(store_.layout(u)))}, DType::f32,
                  store_.options().memory.with(Category::workspace));
  states_->release(u, true);
}

// AdamW, AdamW8bit and SGD: element-wise updates of each unit's owned slice.
void Trainer::step_elementwise(std::int64_t k, double lr, float grad_scale) {
  // With f32 masters in the optimizer state, the 16-bit slice is only written: an offloaded
  // store does not read it first.
  store_.expect_value_shards_in_order(store_.options().param_dtype != DType::f32);
  store_.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < store_.num_units(); ++u) update_unit(u, k, lr, grad_scale, nullptr);
}

void Trainer::update_unit(std::size_t u, std::int64_t k, double lr, float grad_scale,
                          const Tensor* grad) {
  const DType pd = store_.options().param_dtype;
  const bool overwrite = pd != DType::f32;
  std::vector<optim::DecayRun> runs;
  const nn::UnitLayout& l = store_.layout(u);
  UnitOptimizerState& s = states_->acquire(u);
  const nn::ValueShardScope held(store_, u, /*dirty=*/true, overwrite);  // written back when released
  const Tensor& vshard = held.get();
  if (overwrite) zero_padding(vshard, owned_numel(l));
  const Tensor master = pd == DType::f32 ? vshard : s.master;
  std::optional<nn::GradShardScope> acquired;
  if (!grad) acquired.emplace(store_, u, /*dirty=*/false);
  const Tensor g = grad ? *grad : acquired->get();
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
    if (opts_.optimizer == OptimizerKind::adamw8bit) {
      runs.push_back({static_cast<std::size_t>(lo), static_cast<std::size_t>(hi), decay});
    } else if (opts_.optimizer == OptimizerKind::adamw ||
               opts_.optimizer == OptimizerKind::onebit_adam) {  // 1-bit Adam's warm-up
      optim::AdamWHyper h = opts_.optimizer == OptimizerKind::adamw
                                ? opts_.adamw
                                : optim::onebit_warmup_hyper(opts_.onebit);
      h.lr = lr;
      if (!decay) h.weight_decay = 0;
      ops::adamw_step(part(master), part(g), part(s.m), part(s.v), h, k, grad_scale, p16);
    } else {
      optim::SGDHyper h = opts_.sgd;
      h.lr = lr;
      if (!decay) h.weight_decay = 0;
      ops::sgd_step(part(master), part(g), part(s.m), h, k, grad_scale, p16);
    }
  }
  if (!runs.empty()) {
    // Parameters are contiguous from flat 0 to numel, so the runs cover [0, owned). A 16-bit
    // gradient is widened block by block inside the kernel (no f32 copy of the unit).
    auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
    optim::AdamWHyper h = opts_.adamw;
    h.lr = lr;
    const optim::Quant8Moments q{s.m_codes.data<std::uint8_t>(), s.v_codes.data<std::uint8_t>(),
                                 s.m_absmax.data<float>(), s.v_absmax.data<float>()};
    optim::adamw8bit_step(master.data<float>(), g.raw(), q, runs.back().end, runs, h, k,
                          grad_scale, p16, pd, g.dtype());
  }
  states_->release(u, true);
}

// ---- updates in backward (step_in_backward) ----

void Trainer::update_in_backward(std::size_t u, const Tensor& grad) {
  // No clipping and no loss scale: step()'s grad_scale would be 1.
  const std::int64_t k = updates_ + 1;
  if (store_.options().memory.device.is_meta() && opts_.optimizer == OptimizerKind::adamw8bit)
    meta_unit(u, store_.options().param_dtype != DType::f32, &grad);
  else
    update_unit(u, k, schedule_->lr_for_update(k), 1.0f, &grad);
}

void Trainer::step_unit(std::size_t u, const Tensor& owned) {
  STRATA_CHECK(opts_.step_in_backward, "train",
               "step_unit needs TrainerOptions::step_in_backward");
  if (stepped_.size() != store_.num_units()) stepped_.assign(store_.num_units(), false);
  STRATA_CHECK(!stepped_.at(u), "train", "unit {} updated twice in one step", u);
  note_final_gradient(u, owned);
  if (stepped_count_ == 0) states_->begin_step();
  update_in_backward(u, owned);
  stepped_[u] = true;
  ++stepped_count_;
  seen_order_.push_back(u);
}

StepResult Trainer::finish_step_in_backward() {
  const std::size_t n = store_.num_units();
  if (stepped_.size() != n) stepped_.assign(n, false);
  if (stepped_count_ == 0) states_->begin_step();
  last_in_backward_ = stepped_count_;
  StepResult r;
  r.lr = schedule_->lr_for_update(updates_ + 1);
  // Units whose gradient backward did not hand over (none reduced for them in this step): as
  // step() would update them.
  for (std::size_t u : step_order_) {
    if (stepped_[u]) continue;
    const nn::GradShardScope g(store_, u, /*dirty=*/false);
    note_final_gradient(u, g.get());
    update_in_backward(u, g.get());
    seen_order_.push_back(u);
  }
  double ss = 0;
  for (std::size_t u = 0; u < n; ++u)
    if (counted_here(u)) ss += noted_ss_.at(u).value();
  forget_final_gradients();
  r.grad_norm = std::sqrt(red_.sum(ss));
  end_update();
  stepped_.assign(n, false);
  stepped_count_ = 0;
  // The next step's read-ahead follows this step's order.
  if (seen_order_ != step_order_) {
    step_order_ = seen_order_;
    states_->expect_order(step_order_);
  }
  seen_order_.clear();
  return r;
}

bool Trainer::local_gradients_next() const {
  if (red_.ranks <= 1) return false;
  if (opts_.optimizer == OptimizerKind::onebit_adam) return opts_.onebit.frozen(updates_ + 1);
  if (opts_.optimizer == OptimizerKind::onebit_lamb) return opts_.onebit_lamb.frozen(updates_ + 1);
  return false;
}

std::vector<Trainer::ErrorSlots> Trainer::error_slots(std::size_t u) const {
  std::vector<ErrorSlots> out;
  if (opts_.optimizer == OptimizerKind::onebit_lamb) {
    // One fused tensor of every parameter: its errors sit on the first unit's first parameter.
    out.resize(store_.layout(u).params.size());
    if (u == onebit_lamb_->errors_unit() && !out.empty()) {
      const auto n = static_cast<std::size_t>(onebit_lamb_->fused_numel());
      out[0] = {0, static_cast<std::int64_t>(optim::onebit_padded_size(n, red_.ranks)),
                static_cast<std::int64_t>(optim::onebit_error_size(n, red_.ranks))};
    }
    return out;
  }
  std::int64_t at = 0;
  for (const nn::Parameter* p : store_.layout(u).params) {
    const auto n = static_cast<std::size_t>(p->shape.numel());
    const auto padded = static_cast<std::int64_t>(optim::onebit_padded_size(n, red_.ranks));
    const std::int64_t size = static_cast<std::int64_t>(optim::onebit_error_size(n, red_.ranks));
    out.push_back({at, at + padded, size});
    at += size;
  }
  return out;
}

// 1-bit Adam past freeze_step: each rank's own gradients into its momentum, the momenta averaged
// by the compressed all-reduce (every parameter of every unit in one exchange), then the update
// with the frozen second moment. Units are whole (stage 0) and their state stays acquired
// across the exchange.
void Trainer::step_onebit_frozen(double lr, float grad_scale) {
  const DType pd = store_.options().param_dtype;
  const optim::OneBitAdamHyper& h = opts_.onebit;
  std::vector<optim::ErrorFeedbackTensor> tensors;
  std::vector<UnitOptimizerState*> held;
  store_.expect_grad_shards_in_order();
  try {
    for (std::size_t u = 0; u < store_.num_units(); ++u) {
      UnitOptimizerState& s = states_->acquire(u);
      held.push_back(&s);
      const nn::UnitLayout& l = store_.layout(u);
      Tensor keep;
      const nn::GradShardScope g(store_, u, false);
      const float* grad = f32_grad(store_, u, g.get(), keep);
      optim::onebit_momentum(s.m.data<float>(), grad, owned_numel(l), h, grad_scale);
      const std::vector<ErrorSlots> slots = error_slots(u);
      for (std::size_t i = 0; i < l.params.size(); ++i)
        tensors.push_back({s.m.data<float>() + l.offsets[i],
                           static_cast<std::size_t>(l.params[i]->shape.numel()),
                           s.errors.data<float>() + slots[i].worker,
                           s.errors.data<float>() + slots[i].server});
    }
    if (red_.ranks > 1) red_.compressed_average(tensors);
    store_.expect_value_shards_in_order();
    for (std::size_t u = 0; u < store_.num_units(); ++u) {
      UnitOptimizerState& s = *held[u];
      const nn::ValueShardScope v(store_, u, /*dirty=*/true);
      float* master = pd == DType::f32 ? v.get().data<float>() : s.master.data<float>();
      auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(v.get().raw());
      const nn::UnitLayout& l = store_.layout(u);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        // Weight decay only on parameters with >= 2 dims (declared `decay`), as AdamW.
        optim::OneBitAdamHyper hh = h;
        if (!l.params[i]->decay) hh.weight_decay = 0;
        const std::int64_t off = l.offsets[i];
        optim::onebit_apply(master + off, s.m.data<float>() + off, s.v.data<float>() + off,
                            static_cast<std::size_t>(l.params[i]->shape.numel()), hh, lr,
                            p16 ? p16 + off : nullptr, pd);
      }
    }
  } catch (...) {
    for (std::size_t u = 0; u < held.size(); ++u) states_->release(u, true);
    throw;
  }
  for (std::size_t u = 0; u < held.size(); ++u) states_->release(u, true);
}

}  // namespace strata::train
