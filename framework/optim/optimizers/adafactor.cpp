#include "framework/optim/optimizers/adafactor.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "framework/backend/ops/ops.hpp"
#include "framework/optim/optimizers/step_sums.hpp"
#include "framework/train/grad_view.hpp"

namespace strata::optim {

namespace {
Declaration adafactor_declaration(bool beta1) {
  Declaration d;
  d.name = "Adafactor";
  d.checkpoint_name = "adafactor";
  if (beta1) d.state.push_back(StateTensor::elements("exp_avg"));
  d.state.push_back(StateTensor::vectors("exp_avg_sq"));   // the vectors' second moment
  d.state.push_back(StateTensor::factored("exp_avg_sq"));  // the matrices' row/column statistics
  d.shard_sums = true;
  d.refusals.tensor_parallel =
      "its factored statistics are taken over whole parameters, not tensor-parallel parts";
  return d;
}
}  // namespace

Adafactor::Adafactor(const AdafactorHyper& h)
    : Optimizer(adafactor_declaration(h.has_beta1())), h_(h), h_nodecay_(h) {
  h_nodecay_.weight_decay = 0;
  v_ = h.has_beta1() ? 1 : 0;
  f_ = v_ + 1;
}

std::shared_ptr<const Optimizer> Adafactor::from_config(const config::Optimizer& c) {
  AdafactorHyper h;
  const HValues& v = c.params;
  h.lr = v.number("lr");
  h.eps1 = v.pair("eps")[0];
  h.eps2 = v.pair("eps")[1];
  h.clip_threshold = v.number("clip_threshold");
  h.decay_rate = v.number("decay_rate");
  h.beta1 = v.optional_number("beta1").value_or(-1.0);  // -1: no first moment
  h.weight_decay = v.number("weight_decay");
  h.scale_parameter = v.flag("scale_parameter");
  h.relative_step = v.flag("relative_step");
  h.warmup_init = v.flag("warmup_init");
  return std::make_shared<Adafactor>(h);
}

std::shared_ptr<const Optimizer> make_adafactor(const config::Optimizer& c) {
  return Adafactor::from_config(c);
}

void Adafactor::to_config(config::Optimizer& out) const {
  out = config::Optimizer("Adafactor");
  out.params.set("lr", h_.lr);
  out.params.set("eps", HPair{h_.eps1, h_.eps2});
  out.params.set("clip_threshold", h_.clip_threshold);
  out.params.set("decay_rate", h_.decay_rate);
  out.params.set("beta1", h_.has_beta1() ? std::optional<double>(h_.beta1) : std::nullopt);
  out.params.set("weight_decay", h_.weight_decay);
  out.params.set("scale_parameter", h_.scale_parameter);
  out.params.set("relative_step", h_.relative_step);
  out.params.set("warmup_init", h_.warmup_init);
}

void Adafactor::bind(const nn::ParamStore& store, int) {
  validate(h_);
  units_.clear();
  num_params_ = 0;
  total_factored_ = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& l = store.layout(u);
    Unit unit;
    unit.fac_base = total_factored_;
    for (const ParamGeometry& g : param_geometry(l)) {
      Param p;
      static_cast<ParamGeometry&>(p) = g;
      p.global = num_params_++;
      p.decay = l.params[g.index]->decay;
      if (p.matrix) unit.factored += p.rows + p.cols;
      unit.params.push_back(p);
    }
    total_factored_ += unit.factored;
    units_.push_back(std::move(unit));
  }
}

void Adafactor::check_checkpoint(
    const std::function<bool(std::string_view, std::string_view)>& has, const nn::ParamStore& store,
    const std::string& dir) const {
  if (store.num_units() == 0 || store.layout(0).params.empty()) return;
  const bool saved = has("exp_avg", store.layout(0).params.front()->name);
  const bool want = h_.has_beta1();
  if (saved != want)
    user_fail("checkpoint",
              "{} was saved by Adafactor {} a first moment but optimizer.params.beta1 is {}: "
              "resume with the beta1 it was saved with",
              dir, saved ? "with" : "without",
              want ? fmt::format("{}", h_.beta1) : std::string("null"));
}

double Adafactor::step(StepContext& ctx, const StepArgs& a) {
  if (ctx.meta()) {
    meta_pass(ctx);
    return a.lr;
  }
  // Every kernel is an ops:: entry, so the update runs where the state is (a GPU's memory or the
  // host's). The sums stay there until each reduction over the shards: two host synchronisations
  // per step on a GPU (StepSums::reduce), none per parameter; the per-parameter scalars (clip
  // divisor, rate) are then computed on the host and passed to the update kernels by value.
  nn::ParamStore& store = ctx.store;
  train::OptimizerStateStore& states = ctx.states;
  const std::int64_t step = a.step;
  const float grad_scale = a.grad_scale;
  const double beta2 = adafactor_beta2(h_, step);
  const double rho = adafactor_step_size(h_, step, a.lr);
  const float eps1 = static_cast<float>(h_.eps1);
  const DType pd = store.options().param_dtype;
  const std::size_t P = num_params_;
  const auto F = static_cast<std::size_t>(total_factored_);
  const Device where = update_device(states.tier(), store.options().memory.device);
  const TensorOptions work = store.options().memory.with(Category::workspace);
  // Reduction 1: [row/column sums of every matrix | sum p² per parameter | sum u² per vector].
  StepSums red1(where, F + 2 * P, work);
  auto fac_sums = [&](std::int64_t at, std::int64_t n) {
    return red1.slice(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
  };
  auto p_sq = [&](std::size_t k) { return red1.slice(F + k, 1); };
  auto u_sq = [&](std::size_t k) { return red1.slice(F + P + k, 1); };
  // Every unit's statistics (old, then new) and factors (row factors where the rows are, column
  // factors after them).
  const Tensor stats = step_scratch(where, static_cast<std::int64_t>(F), DType::f32, work);
  const Tensor factors = step_scratch(where, static_cast<std::int64_t>(F), DType::f32, work);
  auto part = [](const Tensor& t, std::int64_t at, std::int64_t n) { return t.slice(0, at, at + n); };

  // ---- pass 1 ----
  train::for_each_unit_grad_tensors(store, states, false, [&](std::size_t u, train::UnitOptimizerState& s, const Tensor& g) {
    const Unit& unit = units_[u];
    const nn::UnitLayout& l = store.layout(u);
    if (unit.factored > 0)
      ops::cast(part(s[f_], 0, unit.factored), part(stats, unit.fac_base, unit.factored));
    const ValueSlice held(store, ctx.staging, u, false);
    const Tensor master_t = pd == DType::f32 ? held.get() : s.master;
    for (const Param& p : unit.params) {
      if (p.a >= p.b) continue;
      const std::int64_t off = p.a - l.lo, n = p.b - p.a;
      if (h_.scale_parameter) ops::sum_squares_add(part(master_t, off, n), p_sq(p.global));
      if (p.matrix) {
        const std::int64_t at = unit.fac_base + p.fac;
        ops::adafactor_sq_sums(part(g, off, n), p.a - p.offset, p.rows, p.cols, grad_scale, eps1,
                               fac_sums(at, p.rows), fac_sums(at + p.rows, p.cols));
      } else {
        ops::adafactor_vector_sumsq(part(g, off, n), part(s[v_], p.v, n), grad_scale, eps1, beta2,
                                    u_sq(p.global));
      }
    }
  });
  red1.reduce(ctx.red, /*back=*/true);

  // ---- the new statistics (the same on every shard) and the matrices' update sums ----
  StepSums u_sq_fac(where, P, work);
  store.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    for (const Param& p : unit.params) {
      if (!p.matrix) continue;
      const std::int64_t at = unit.fac_base + p.fac;
      const Tensor row = part(stats, at, p.rows), col = part(stats, at + p.rows, p.cols);
      ops::adafactor_ema(row, fac_sums(at, p.rows), static_cast<double>(p.cols), beta2);
      ops::adafactor_ema(col, fac_sums(at + p.rows, p.cols), static_cast<double>(p.rows), beta2);
      ops::adafactor_factors(row, col, part(factors, at, p.rows), part(factors, at + p.rows, p.cols));
    }
    Tensor keep, g;
    std::optional<nn::GradShardScope> held;
    const nn::UnitLayout& l = store.layout(u);
    for (const Param& p : unit.params) {
      if (!p.matrix || p.a >= p.b) continue;
      if (!g.defined()) g = train::f32_grad_tensor(store, u, held.emplace(store, u, false).get(), keep);
      const std::int64_t at = unit.fac_base + p.fac;
      ops::adafactor_factored_sumsq(part(g, p.a - l.lo, p.b - p.a), p.a - p.offset, p.rows, p.cols,
                                    grad_scale, part(factors, at, p.rows),
                                    part(factors, at + p.rows, p.cols), u_sq_fac.slice(p.global, 1));
    }
  }
  u_sq_fac.reduce(ctx.red, /*back=*/false);

  // ---- pass 2 ----
  const std::vector<double>& sums1 = red1.host();
  train::for_each_unit_grad_tensors(store, states, true, [&](std::size_t u, train::UnitOptimizerState& s, const Tensor& g) {
    const Unit& unit = units_[u];
    const nn::UnitLayout& l = store.layout(u);
    if (unit.factored > 0)
      ops::cast(part(stats, unit.fac_base, unit.factored), part(s[f_], 0, unit.factored));
    ValueSlice held(store, ctx.staging, u, /*dirty=*/true);
    const Tensor& vshard = held.get();
    const Tensor master = pd == DType::f32 ? vshard : s.master;
    for (const Param& p : unit.params) {
      if (p.a >= p.b) continue;
      const std::int64_t off = p.a - l.lo, n = p.b - p.a;
      const double numel = static_cast<double>(p.numel);
      AdafactorScalars sc;
      sc.grad_scale = grad_scale;
      sc.beta2 = beta2;
      const double usq = p.matrix ? u_sq_fac.host()[p.global] : sums1[F + P + p.global];
      sc.clip_divisor = adafactor_clip_divisor(h_, std::sqrt(usq / numel));
      sc.lr = adafactor_lr(h_, rho, std::sqrt(sums1[F + p.global] / numel));
      const AdafactorHyper& hh = p.decay ? h_ : h_nodecay_;
      const Tensor m = h_.has_beta1() ? part(s[m_], off, n) : Tensor();
      const Tensor q = pd == DType::f32 ? Tensor() : part(vshard, off, n);
      if (p.matrix) {
        const std::int64_t at = unit.fac_base + p.fac;
        ops::adafactor_apply_factored(part(master, off, n), part(g, off, n), m, p.a - p.offset,
                                      p.rows, p.cols, part(factors, at, p.rows),
                                      part(factors, at + p.rows, p.cols), hh, sc, q);
      } else {
        ops::adafactor_apply_vector(part(master, off, n), part(g, off, n), part(s[v_], p.v, n), m,
                                    hh, sc, q);
      }
    }
    held.finish();
  });
  return rho;
}

}  // namespace strata::optim
