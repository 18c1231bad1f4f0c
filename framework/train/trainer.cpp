#include "framework/train/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "framework/train/grad_view.hpp"

namespace strata::train {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

int state_pad_multiple(const TrainerOptions& o, int shard_count) {
  return optim::state_pad_multiple(o.optimizer->declaration(), shard_count);
}

Trainer::Trainer(nn::ParamStore& store, const TrainerOptions& opts, ShardReductions reductions,
                 std::unique_ptr<OptimizerStateStore> states)
    : store_(store),
      opts_(opts),
      red_(std::move(reductions)),
      states_(std::move(states)),
      grad_sums_(store.num_units()) {
  STRATA_CHECK(opts.optimizer, "train", "TrainerOptions::optimizer is not set");
  opt_ = opts.optimizer->clone();
  const optim::Declaration& decl = opt_->declaration();
  opt_->bind(store, red_.ranks);  // its hyperparameters and the store's layout checked
  STRATA_CHECK(!decl.compressed_exchange || red_.ranks == 1 || red_.compressed_average, "train",
               "{} on {} ranks needs ShardReductions::compressed_average", decl.name, red_.ranks);
  // Sums over shards are a declared reduction: an optimizer that did not declare them gets none
  // (a forgotten declaration fails at its first step, on one rank as on many).
  if (!decl.shard_sums)
    red_.sum_vector = [name = decl.name](std::span<double>) {
      fail("train", "{} sums over shards (ShardReductions::sum_vector) without declaring "
           "shard_sums in its optim::Declaration", name);
    };
  schedule_ = optim::make_schedule(opts.schedule, opt_->lr());
  if (opts.precision == Precision::fp16)
    scaler_ = precision::make_loss_scaler(opts.static_loss_scale, opts.dynamic_scaler);
  const DType pd = store.options().param_dtype;
  STRATA_CHECK(store.options().grad_dtype == pd, "train",
               "gradients ({}) must have the parameters' dtype ({})",
               dtype_name(store.options().grad_dtype), dtype_name(pd));
  if (!states_) states_ = make_memory_state_store(store.options().memory);
  staging_ = ValueStaging::make(store, states_->tier());
  store.expect_value_shards_in_order();
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& ul = store.layout(u);
    for (const optim::StateTensor& t : decl.state)
      STRATA_CHECK(t.shape != optim::StateShape::blocks ||
                       (ul.lo % t.count == 0 && (ul.hi - ul.lo) % t.count == 0),
                   "train",
                   "{}: unit {} owns [{}, {}), not whole {}-element quantization blocks; build the "
                   "ParamStore with pad_multiple = train::state_pad_multiple(options, shard count)",
                   decl.name, u, ul.lo, ul.hi, t.count);
    const StateLayout l = optim::unit_state_layout(decl, store, u, red_.ranks);
    const nn::ValueShardScope values(store, u, false);  // released even if create throws
    states_->create(u, l, values.get());
  }
  if (opts.step_in_backward) {
    STRATA_CHECK(decl.unit_steps, "train",
                 "updating units in backward is implemented for the optimizers that update each "
                 "unit on its own ({}), not {}",
                 optim::optimizer_names([](const optim::Declaration& d) { return d.unit_steps; }),
                 decl.name);
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

void Trainer::take_grad_sums(std::size_t u, const Tensor& owned) {
  const nn::UnitLayout& l = store_.layout(u);
  const auto n = static_cast<std::int64_t>(owned_numel(l));
  if (n <= 0) {
    grad_sums_.skip(u);
    return;
  }
  const Tensor slots = grad_sums_.take(u, owned);
  const Tensor counted = slots.slice(0, 0, 1), checked = slots.slice(0, 1, 2);
  if (red_.count_replicated) {
    ops::sum_squares_add(owned.slice(0, 0, n), counted);
    return;
  }
  // Only the split parameters' parts of the owned slice [lo, lo + n) count here; the replicated
  // ones another rank counts, but the overflow check reads them here too (fp16).
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    const bool split = l.params[i]->placement.split();
    if (!split && !scaler_) continue;
    const std::int64_t a = std::max(l.lo, l.offsets[i]);
    const std::int64_t b = std::min(l.lo + n, l.offsets[i] + l.params[i]->shape.numel());
    if (a < b) ops::sum_squares_add(owned.slice(0, a - l.lo, b - l.lo), split ? counted : checked);
  }
}

void Trainer::note_final_gradient(std::size_t u, const Tensor& owned) { take_grad_sums(u, owned); }

void Trainer::forget_final_gradients() { grad_sums_.forget(); }

std::vector<std::array<double, 2>> Trainer::read_grad_sums() {
  // Every unit's shares, from the notes when every unit was noted, else from a pass over the
  // gradients in unit order (an offloaded gradient store reads ahead in that order).
  if (!grad_sums_.complete()) {
    store_.expect_grad_shards_in_order();
    for (std::size_t u = 0; u < store_.num_units(); ++u) {
      if (owned_numel(store_.layout(u)) == 0) {
        grad_sums_.skip(u);
        continue;
      }
      const nn::GradShardScope g(store_, u, false);  // offloaded gradients: read from their store
      take_grad_sums(u, g.get());
    }
  }
  auto sums = grad_sums_.read();
  forget_final_gradients();
  return sums;
}

StepResult Trainer::step() {
  if (opts_.step_in_backward) return finish_step_in_backward();
  StepResult r;
  r.loss_scale = loss_scale();
  const auto sums = read_grad_sums();  // the step's one host read of the norm and the check
  if (scaler_ && red_.any(std::any_of(sums.begin(), sums.end(), [](const auto& s) {
        return !std::isfinite(s[0]) || !std::isfinite(s[1]);
      }))) {
    r.applied = false;
    r.grad_norm = std::numeric_limits<double>::infinity();
    r.lr = current_lr();
    scaler_->update(true);  // throws when stuck at the minimum scale
    store_.zero_grads();
    return r;
  }
  // A unit another process also counts (a pipeline's tied copy) is left out of the norm.
  double ss = 0;
  for (std::size_t u = 0; u < store_.num_units(); ++u)
    if (counted_here(u)) ss += sums[u][0];
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
  optim::StepContext ctx{store_, *states_, red_, staging_.get()};
  r.lr = opt_->step(ctx, optim::StepArgs{k, r.lr, grad_scale});
  end_update();
  return r;
}

bool Trainer::counted_here(std::size_t u) const {
  return std::find(red_.counted_elsewhere.begin(), red_.counted_elsewhere.end(), u) ==
         red_.counted_elsewhere.end();
}

void Trainer::end_update() {
  // Staged value slices: the next step's kernels wait for their copies back to the device.
  if (staging_) staging_->end_step();
  states_->end_step();
  // Offloaded parameter slices: this step's write-backs are complete (or their error thrown).
  if (const auto& vs = store_.options().value_store) vs->flush();
  if (scaler_) scaler_->update(false);
  store_.zero_grads();
  ++updates_;
}

// ---- updates in backward (step_in_backward) ----

void Trainer::update_in_backward(std::size_t u, const Tensor& grad) {
  // No clipping and no loss scale: step()'s grad_scale would be 1.
  const std::int64_t k = updates_ + 1;
  auto* opt = dynamic_cast<optim::UnitStepOptimizer*>(opt_.get());
  STRATA_CHECK(opt, "train", "{} does not update units on their own", opt_->name());
  const optim::StepArgs args{k, schedule_->lr_for_update(k), 1.0f};
  optim::StepContext ctx{store_, *states_, red_, staging_.get()};
  optim::update_unit_of(ctx, u, &grad, [&](optim::UnitSlice& s) { opt->update_unit(s, args); });
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
  STRATA_CHECK(grad_sums_.complete(), "train", "updates in backward: a unit's norm share is missing");
  const auto sums = read_grad_sums();
  double ss = 0;
  for (std::size_t u = 0; u < n; ++u)
    if (counted_here(u)) ss += sums[u][0];
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
  return red_.ranks > 1 && opt_->local_gradients(updates_ + 1);
}

std::vector<optim::ErrorSlot> Trainer::error_slots(std::size_t u) const {
  return optim::error_slots(opt_->declaration(), store_, u, red_.ranks);
}

}  // namespace strata::train
