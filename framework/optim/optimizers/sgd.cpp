#include "framework/optim/optimizers/sgd.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::optim {

namespace {
Declaration sgd_declaration() {
  Declaration d;
  d.name = "SGD";
  d.checkpoint_name = "sgd";
  // The momentum buffer exists even with momentum 0 (as the checkpoints have always held it).
  d.state = {StateTensor::elements("momentum")};
  return d;
}
}  // namespace

SGD::SGD(const SGDHyper& h) : UnitStepOptimizer(sgd_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> SGD::from_config(const config::Optimizer& c) {
  SGDHyper h;
  h.lr = c.params.number("lr");
  h.momentum = c.params.number("momentum");
  h.nesterov = c.params.flag("nesterov");
  h.weight_decay = c.params.number("weight_decay");
  return std::make_shared<SGD>(h);
}

std::shared_ptr<const Optimizer> make_sgd(const config::Optimizer& c) {
  return SGD::from_config(c);
}

void SGD::to_config(config::Optimizer& out) const {
  out = config::Optimizer("SGD");
  out.params.set("lr", h_.lr);
  out.params.set("momentum", h_.momentum);
  out.params.set("nesterov", h_.nesterov);
  out.params.set("weight_decay", h_.weight_decay);
}

void SGD::bind(const nn::ParamStore&, int) { validate(h_); }

void SGD::update_unit(UnitSlice& s, const StepArgs& a) {
  train::UnitOptimizerState& st = *s.state;
  s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
    auto part = [&](const Tensor& t) { return t.defined() ? t.slice(0, lo, hi) : Tensor(); };
    SGDHyper h = h_;
    h.lr = a.lr;
    if (!p.decay) h.weight_decay = 0;  // only parameters with >= 2 dims (declared `decay`)
    ops::sgd_step(part(s.master), part(s.grad), part(st[0]), h, a.step, a.grad_scale,
                  part(s.param16));
  });
}

}  // namespace strata::optim
