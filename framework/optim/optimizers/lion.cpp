#include "framework/optim/optimizers/lion.hpp"

namespace strata::optim {

namespace {
Declaration lion_declaration() {
  Declaration d;
  d.name = "Lion";
  d.checkpoint_name = "lion";
  d.state = {StateTensor::elements("exp_avg")};
  d.refusals.gpu = "it has no CUDA kernels; AdamW and SGD have";
  return d;
}
}  // namespace

LionHyper lion_from_config(const config::Optimizer& c) {
  LionHyper h;
  h.lr = c.lr;
  h.beta1 = c.betas[0];
  h.beta2 = c.betas[1];
  h.weight_decay = c.weight_decay;
  return h;
}

void lion_to_config(const LionHyper& h, config::Optimizer& out) {
  out.lr = h.lr;
  out.betas = {h.beta1, h.beta2};
  out.weight_decay = h.weight_decay;
}

Lion::Lion(const LionHyper& h) : UnitStepOptimizer(lion_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> Lion::from_config(const config::Optimizer& c) {
  return std::make_shared<Lion>(lion_from_config(c));
}

void Lion::to_config(config::Optimizer& out) const {
  out.type = config::OptimizerType::lion;
  lion_to_config(h_, out);
}

void Lion::bind(const nn::ParamStore&, int) { validate(h_); }

void Lion::update_unit(UnitSlice& s, const StepArgs& a) {
  Tensor keep;
  const float* g = s.f32_grad(keep);  // 16-bit gradients widened (on the meta device: charged)
  if (s.meta()) return;
  float* master = s.master.data<float>();
  float* m = (*s.state)[0].data<float>();
  auto* p16 = s.param16.defined() ? static_cast<std::uint16_t*>(s.param16.raw()) : nullptr;
  const DType dt16 = s.param16.defined() ? s.param16.dtype() : DType::bf16;
  s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
    LionHyper h = h_;
    h.lr = a.lr;
    if (!p.decay) h.weight_decay = 0;  // only parameters with >= 2 dims (declared `decay`)
    lion_step(master + lo, g + lo, m + lo, static_cast<std::size_t>(hi - lo), h, a.step,
              a.grad_scale, p16 ? p16 + lo : nullptr, dt16);
  });
}

}  // namespace strata::optim
