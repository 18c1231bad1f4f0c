#include "framework/optim/optimizers/lion8bit.hpp"

#include "framework/backend/ops/ops.hpp"
#include "framework/core/meta_device.hpp"
#include "framework/optim/optimizers/blockwise_slice.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "framework/optim/quantize.hpp"

namespace strata::optim {

namespace {
Declaration lion8bit_declaration() {
  Declaration d;
  d.name = "Lion8bit";
  d.checkpoint_name = "lion8bit";
  d.state = {StateTensor::elements("exp_avg_q8", DType::u8),
             StateTensor::blocks("exp_avg_absmax", static_cast<std::int64_t>(kQuantBlock), "blocks")};
  d.refusals.tensor_parallel =
      "its quantization blocks are cut from whole parameters' flat buffers, not tensor-parallel "
      "parts";
  d.state_words = "8-bit m";
  return d;
}
}  // namespace

Lion8bit::Lion8bit(const LionHyper& h) : UnitStepOptimizer(lion8bit_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> Lion8bit::from_config(const config::Optimizer& c) {
  return std::make_shared<Lion8bit>(lion_from_config(c));
}

std::shared_ptr<const Optimizer> make_lion8bit(const config::Optimizer& c) {
  return Lion8bit::from_config(c);
}

void Lion8bit::to_config(config::Optimizer& out) const {
  out = config::Optimizer("Lion8bit");
  lion_to_config(h_, out);
}

void Lion8bit::bind(const nn::ParamStore&, int) { validate(h_); }

void Lion8bit::update_unit(UnitSlice& s, const StepArgs& a) {
  // The kernel widens 16-bit gradients block by block: no copy to charge. A GPU job's plan
  // (meta_cuda()) runs the op: the CUDA op's decay runs beyond kQ8InlineRuns take a workspace.
  if (s.meta() && !is_meta_cuda(s.grad.device())) return;
  const BlockwiseSlice b(s);
  if (b.runs.empty()) return;
  train::UnitOptimizerState& st = *s.state;
  LionHyper h = h_;
  h.lr = a.lr;
  ops::lion8bit_step(b.elements(s.master), b.elements(s.grad), b.elements(st[0]),
                     b.per_block(st[1]), b.runs, h, a.step, a.grad_scale, b.elements(s.param16));
}

}  // namespace strata::optim
