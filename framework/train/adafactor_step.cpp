#include "framework/train/adafactor_step.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "framework/backend/ops/ops.hpp"
#include "framework/train/grad_view.hpp"
#include "framework/train/trainer.hpp"

namespace strata::train {

AdafactorStep::AdafactorStep(const nn::ParamStore& store, const optim::AdafactorHyper& h)
    : h_(h), h_nodecay_(h) {
  optim::validate(h);
  h_nodecay_.weight_decay = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& l = store.layout(u);
    Unit unit;
    unit.fac_base = total_factored_;
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      const Shape& shape = l.params[i]->shape;
      Param p;
      p.index = i;
      p.global = num_params_++;
      p.numel = shape.numel();
      p.decay = l.params[i]->decay;
      p.offset = l.offsets[i];
      p.factored = shape.rank() >= 2 && p.numel > 0;
      p.a = std::max(l.lo, p.offset);
      p.b = std::min(l.hi, p.offset + p.numel);
      if (p.factored) {
        p.rows = shape.dims()[0];
        p.cols = p.numel / p.rows;
        p.fac = unit.factored;
        unit.factored += p.rows + p.cols;
      } else if (p.a < p.b) {
        p.v = unit.packed_v;
        unit.packed_v += p.b - p.a;
      }
      unit.params.push_back(p);
    }
    total_factored_ += unit.factored;
    units_.push_back(std::move(unit));
  }
}

double AdafactorStep::run(nn::ParamStore& store, OptimizerStateStore& states,
                          const ShardReductions& red, std::int64_t step, double lr,
                          float grad_scale) {
  const double beta2 = optim::adafactor_beta2(h_, step);
  const double rho = optim::adafactor_step_size(h_, step, lr);
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
  for_each_unit_grads(store, states, false, [&](std::size_t u, UnitOptimizerState& s, const float* g) {
    const Unit& unit = units_[u];
    const nn::UnitLayout& l = store.layout(u);
    if (unit.factored > 0)
      std::copy_n(s.factored.data<float>(), unit.factored, stats.data() + unit.fac_base);
    const nn::ValueShardScope held(store, u, false);
    const Tensor master_t = pd == DType::f32 ? held.get() : s.master;
    for (const Param& p : unit.params) {
      if (p.a >= p.b) continue;
      const std::int64_t off = p.a - l.lo;
      const auto n = static_cast<std::size_t>(p.b - p.a);
      if (h_.scale_parameter && n > 0)
        p_sq[p.global] += ops::sum_squares(master_t.slice(0, off, off + static_cast<std::int64_t>(n)));
      if (p.factored) {
        double* rows = fac_sums + unit.fac_base + p.fac;
        optim::adafactor_sq_sums(g + off, p.a - p.offset, n, p.cols, grad_scale, eps1, rows,
                                 rows + p.rows);
      } else {
        u_sq[p.global] += optim::adafactor_vector_sumsq(g + off, s.v.data<float>() + p.v, n,
                                                        grad_scale, eps1, beta2);
      }
    }
  });
  red.sum_vector(red1);

  // ---- the new statistics (the same on every shard) and the matrices' update sums ----
  std::vector<float> factors(F);  // row factors where the rows are, column factors after them
  std::vector<double> u_sq_fac(P, 0.0);
  store.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    for (const Param& p : unit.params) {
      if (!p.factored) continue;
      const std::int64_t at = unit.fac_base + p.fac;
      float* st = stats.data() + at;
      optim::adafactor_ema(st, fac_sums + at, static_cast<std::size_t>(p.rows),
                           static_cast<double>(p.cols), beta2);
      optim::adafactor_ema(st + p.rows, fac_sums + at + p.rows, static_cast<std::size_t>(p.cols),
                           static_cast<double>(p.rows), beta2);
      optim::adafactor_factors(st, p.rows, st + p.rows, p.cols, factors.data() + at,
                               factors.data() + at + p.rows);
    }
    Tensor keep;
    const float* g = nullptr;
    std::optional<nn::GradShardScope> held;
    const nn::UnitLayout& l = store.layout(u);
    for (const Param& p : unit.params) {
      if (!p.factored || p.a >= p.b) continue;
      if (!g) g = f32_grad(store, u, held.emplace(store, u, false).get(), keep);
      const std::int64_t at = unit.fac_base + p.fac;
      u_sq_fac[p.global] += optim::adafactor_factored_sumsq(
          g + (p.a - l.lo), p.a - p.offset, static_cast<std::size_t>(p.b - p.a), p.cols,
          grad_scale, factors.data() + at, factors.data() + at + p.rows);
    }
  }
  red.sum_vector(u_sq_fac);

  // ---- pass 2 ----
  for_each_unit_grads(store, states, true, [&](std::size_t u, UnitOptimizerState& s, const float* g) {
    const Unit& unit = units_[u];
    const nn::UnitLayout& l = store.layout(u);
    if (unit.factored > 0)
      std::copy_n(stats.data() + unit.fac_base, unit.factored, s.factored.data<float>());
    const nn::ValueShardScope held(store, u, /*dirty=*/true);
    const Tensor& vshard = held.get();
    float* master = pd == DType::f32 ? vshard.data<float>() : s.master.data<float>();
    auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
    for (const Param& p : unit.params) {
      if (p.a >= p.b) continue;
      const std::int64_t off = p.a - l.lo;
      const auto n = static_cast<std::size_t>(p.b - p.a);
      const double numel = static_cast<double>(p.numel);
      optim::AdafactorScalars sc;
      sc.grad_scale = grad_scale;
      sc.beta2 = beta2;
      const double usq = p.factored ? u_sq_fac[p.global] : u_sq[p.global];
      sc.clip_divisor = optim::adafactor_clip_divisor(h_, std::sqrt(usq / numel));
      sc.lr = optim::adafactor_lr(h_, rho, std::sqrt(p_sq[p.global] / numel));
      const optim::AdafactorHyper& hh = p.decay ? h_ : h_nodecay_;
      float* m = h_.has_beta1() ? s.m.data<float>() + off : nullptr;
      std::uint16_t* q = p16 ? p16 + off : nullptr;
      if (p.factored) {
        const std::int64_t at = unit.fac_base + p.fac;
        optim::adafactor_apply_factored(master + off, g + off, m, p.a - p.offset, n, p.cols,
                                        factors.data() + at, factors.data() + at + p.rows, hh, sc,
                                        q, pd);
      } else {
        optim::adafactor_apply_vector(master + off, g + off, s.v.data<float>() + p.v, m, n, hh,
                                      sc, q, pd);
      }
    }
  });
  return rho;
}

}  // namespace strata::train
