#include "framework/optim/optimizers/adamw8bit.hpp"

#include "framework/backend/ops/ops.hpp"
#include "framework/core/meta_device.hpp"
#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/blockwise_slice.hpp"

namespace strata::optim {

namespace {
Declaration adamw8bit_declaration() {
  const auto blk = static_cast<std::int64_t>(kQuantBlock);
  Declaration d;
  d.name = "AdamW8bit";
  d.checkpoint_name = "adamw8bit";
  d.state = {StateTensor::elements("exp_avg_q8", DType::u8),
             StateTensor::elements("exp_avg_sq_q8", DType::u8),
             StateTensor::blocks("exp_avg_absmax", blk, "blocks"),
             StateTensor::blocks("exp_avg_sq_absmax", blk, "blocks")};
  d.refusals.tensor_parallel =
      "its quantization blocks are cut from whole parameters' flat buffers, not tensor-parallel "
      "parts";
  d.state_words = "8-bit m, v";
  return d;
}
}  // namespace

AdamW8bit::AdamW8bit(const AdamWHyper& h) : UnitStepOptimizer(adamw8bit_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> AdamW8bit::from_config(const config::Optimizer& c) {
  AdamWHyper h;
  adam_family_from_config(h, c);
  h.bias_correction = c.params.flag("bias_correction");
  return std::make_shared<AdamW8bit>(h);
}

std::shared_ptr<const Optimizer> make_adamw8bit(const config::Optimizer& c) {
  return AdamW8bit::from_config(c);
}

void AdamW8bit::to_config(config::Optimizer& out) const {
  out = config::Optimizer("AdamW8bit");
  adam_family_to_config(h_, out);
  out.params.set("bias_correction", h_.bias_correction);
}

void AdamW8bit::bind(const nn::ParamStore&, int) { validate(h_); }

void AdamW8bit::update_unit(UnitSlice& s, const StepArgs& a) {
  // The kernel widens 16-bit gradients block by block: no copy to charge. A GPU job's plan
  // (meta_cuda()) runs the op: the CUDA op's decay runs beyond kQ8InlineRuns take a workspace.
  if (s.meta() && !is_meta_cuda(s.grad.device())) return;
  const BlockwiseSlice b(s);
  if (b.runs.empty()) return;
  train::UnitOptimizerState& st = *s.state;
  AdamWHyper h = h_;
  h.lr = a.lr;
  ops::adamw8bit_step(b.elements(s.master), b.elements(s.grad), b.elements(st[0]),
                      b.elements(st[1]), b.per_block(st[2]), b.per_block(st[3]), b.runs, h, a.step,
                      a.grad_scale, b.elements(s.param16));
}

}  // namespace strata::optim
