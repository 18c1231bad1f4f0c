#include "framework/optim/optimizers/adamw.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::optim {

namespace {
Declaration adamw_declaration() {
  Declaration d;
  d.name = "AdamW";
  d.checkpoint_name = "adamw";
  d.state = {StateTensor::elements("exp_avg"), StateTensor::elements("exp_avg_sq")};
  return d;
}
}  // namespace

AdamW::AdamW(const AdamWHyper& h) : UnitStepOptimizer(adamw_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> AdamW::from_config(const config::Optimizer& c) {
  AdamWHyper h;
  adam_family_from_config(h, c);
  h.bias_correction = c.params.flag("bias_correction");
  return std::make_shared<AdamW>(h);
}

std::shared_ptr<const Optimizer> make_adamw(const config::Optimizer& c) {
  return AdamW::from_config(c);
}

void AdamW::to_config(config::Optimizer& out) const {
  out = config::Optimizer("AdamW");
  adam_family_to_config(h_, out);
  out.params.set("bias_correction", h_.bias_correction);
}

void AdamW::bind(const nn::ParamStore&, int) { validate(h_); }

void AdamW::update_unit(UnitSlice& s, const StepArgs& a) {
  train::UnitOptimizerState& st = *s.state;
  s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
    auto part = [&](const Tensor& t) { return t.defined() ? t.slice(0, lo, hi) : Tensor(); };
    AdamWHyper h = h_;
    h.lr = a.lr;
    if (!p.decay) h.weight_decay = 0;  // only parameters with >= 2 dims (declared `decay`)
    ops::adamw_step(part(s.master), part(s.grad), part(st[0]), part(st[1]), h, a.step,
                    a.grad_scale, part(s.param16));
  });
}

}  // namespace strata::optim
