#include "framework/optim/optimizers/lion8bit.hpp"

#include "framework/backend/ops/ops.hpp"

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

void Lion8bit::to_config(config::Optimizer& out) const {
  out.type = config::OptimizerType::lion8bit;
  lion_to_config(h_, out);
}

void Lion8bit::bind(const nn::ParamStore&, int) { validate(h_); }

void Lion8bit::update_unit(UnitSlice& s, const StepArgs& a) {
  if (s.meta()) return;  // the kernel widens 16-bit gradients block by block: no copy to charge
  std::vector<DecayRun> runs;
  s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
    runs.push_back({static_cast<std::size_t>(lo), static_cast<std::size_t>(hi), p.decay});
  });
  if (runs.empty()) return;
  // Parameters are contiguous from flat 0, so the runs cover [0, n): the buffers' first n
  // elements and their first quant_blocks(n) blocks.
  const auto n = static_cast<std::int64_t>(runs.back().end);
  const auto blocks = static_cast<std::int64_t>(quant_blocks(runs.back().end));
  auto first = [](const Tensor& t, std::int64_t k) { return t.defined() ? t.slice(0, 0, k) : Tensor(); };
  train::UnitOptimizerState& st = *s.state;
  LionHyper h = h_;
  h.lr = a.lr;
  ops::lion8bit_step(first(s.master, n), first(s.grad, n), first(st[0], n), first(st[1], blocks),
                     runs, h, a.step, a.grad_scale, first(s.param16, n));
}

}  // namespace strata::optim
