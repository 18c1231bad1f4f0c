#include "framework/optim/optimizers/adafactor.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "framework/backend/ops/ops.hpp"
#include "framework/optim/optimizers/cuda_refusal.hpp"
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
  d.refusals.gpu = kNoCudaKernels;
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
  // Reduction 1: [row/column sums of every matrix | sum p² per parameter | sum u² per vector].
  std::vector<double> red1(F + 2 * P, 0.0);
  double* fac_sums = red1.data();
  double* p_sq = red1.data() + F;
  double* u_sq = red1.data() + F + P;
  std::vector<float> stats(F);  // every unit's statistics: old, then new

  // ---- pass 1 ----
  train::for_each_unit_grads(store, states, false, [&](std::size_t u, train::UnitOptimizerState& s, const float* g) {
    const Unit& unit = units_[u];
    const nn::UnitLayout& l = store.layout(u);
    if (unit.factored > 0)
      std::copy_n(s[f_].data<float>(), unit.factored, stats.data() + unit.fac_base);
    const ValueSlice held(store, ctx.staging, u, false);
    const Tensor master_t = pd == DType::f32 ? held.get() : s.master;
    for (const Param& p : unit.params) {
      if (p.a >= p.b) continue;
      const std::int64_t off = p.a - l.lo;
      const auto n = static_cast<std::size_t>(p.b - p.a);
      if (h_.scale_parameter && n > 0)
        p_sq[p.global] += ops::sum_squares(master_t.slice(0, off, off + static_cast<std::int64_t>(n)));
      if (p.matrix) {
        double* rows = fac_sums + unit.fac_base + p.fac;
        adafactor_sq_sums(g + off, p.a - p.offset, n, p.cols, grad_scale, eps1, rows,
                          rows + p.rows);
      } else {
        u_sq[p.global] += adafactor_vector_sumsq(g + off, s[v_].data<float>() + p.v, n,
                                                 grad_scale, eps1, beta2);
      }
    }
  });
  ctx.red.sum_vector(red1);

  // ---- the new statistics (the same on every shard) and the matrices' update sums ----
  std::vector<float> factors(F);  // row factors where the rows are, column factors after them
  std::vector<double> u_sq_fac(P, 0.0);
  store.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    for (const Param& p : unit.params) {
      if (!p.matrix) continue;
      const std::int64_t at = unit.fac_base + p.fac;
      float* st = stats.data() + at;
      adafactor_ema(st, fac_sums + at, static_cast<std::size_t>(p.rows),
                    static_cast<double>(p.cols), beta2);
      adafactor_ema(st + p.rows, fac_sums + at + p.rows, static_cast<std::size_t>(p.cols),
                    static_cast<double>(p.rows), beta2);
      adafactor_factors(st, p.rows, st + p.rows, p.cols, factors.data() + at,
                        factors.data() + at + p.rows);
    }
    Tensor keep;
    const float* g = nullptr;
    std::optional<nn::GradShardScope> held;
    const nn::UnitLayout& l = store.layout(u);
    for (const Param& p : unit.params) {
      if (!p.matrix || p.a >= p.b) continue;
      if (!g) g = train::f32_grad(store, u, held.emplace(store, u, false).get(), keep);
      const std::int64_t at = unit.fac_base + p.fac;
      u_sq_fac[p.global] += adafactor_factored_sumsq(
          g + (p.a - l.lo), p.a - p.offset, static_cast<std::size_t>(p.b - p.a), p.cols,
          grad_scale, factors.data() + at, factors.data() + at + p.rows);
    }
  }
  ctx.red.sum_vector(u_sq_fac);

  // ---- pass 2 ----
  train::for_each_unit_grads(store, states, true, [&](std::size_t u, train::UnitOptimizerState& s, const float* g) {
    const Unit& unit = units_[u];
    const nn::UnitLayout& l = store.layout(u);
    if (unit.factored > 0)
      std::copy_n(stats.data() + unit.fac_base, unit.factored, s[f_].data<float>());
    ValueSlice held(store, ctx.staging, u, /*dirty=*/true);
    const Tensor& vshard = held.get();
    float* master = pd == DType::f32 ? vshard.data<float>() : s.master.data<float>();
    auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
    for (const Param& p : unit.params) {
      if (p.a >= p.b) continue;
      const std::int64_t off = p.a - l.lo;
      const auto n = static_cast<std::size_t>(p.b - p.a);
      const double numel = static_cast<double>(p.numel);
      AdafactorScalars sc;
      sc.grad_scale = grad_scale;
      sc.beta2 = beta2;
      const double usq = p.matrix ? u_sq_fac[p.global] : u_sq[p.global];
      sc.clip_divisor = adafactor_clip_divisor(h_, std::sqrt(usq / numel));
      sc.lr = adafactor_lr(h_, rho, std::sqrt(p_sq[p.global] / numel));
      const AdafactorHyper& hh = p.decay ? h_ : h_nodecay_;
      float* m = h_.has_beta1() ? s[m_].data<float>() + off : nullptr;
      std::uint16_t* q = p16 ? p16 + off : nullptr;
      if (p.matrix) {
        const std::int64_t at = unit.fac_base + p.fac;
        adafactor_apply_factored(master + off, g + off, m, p.a - p.offset, n, p.cols,
                                 factors.data() + at, factors.data() + at + p.rows, hh, sc, q, pd);
      } else {
        adafactor_apply_vector(master + off, g + off, s[v_].data<float>() + p.v, m, n, hh, sc, q,
                               pd);
      }
    }
    held.finish();
  });
  return rho;
}

}  // namespace strata::optim
