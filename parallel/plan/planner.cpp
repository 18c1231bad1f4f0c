#include "parallel/plan/planner.hpp"

#include "framework/core/meta_device.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/train/from_config.hpp"
#include "offload/nvme_state_store.hpp"
#include "offload/value_shard_store.hpp"
#include "parallel/comm/planning.hpp"
#include "parallel/engine/training.hpp"

namespace strata::parallel::plan {

ModelFactory gpt_model() {
  return [](const config::Config& cfg) -> std::unique_ptr<nn::Model> {
    // Rank 0's tensor-parallel part (the part every plan is made for).
    return std::make_unique<nn::Gpt>(train::gpt_config(cfg), tensor_shard(cfg, planning_world(1)));
  };
}

bool MemoryPlan::fits(Tier t) const {
  const auto& cap = caps[static_cast<int>(t)];
  return !cap || peak(t) <= *cap;
}

bool MemoryPlan::fits() const {
  return fits(Tier::device) && fits(Tier::host) && fits(Tier::nvme);
}

namespace {

// What a swap file moved (meta swappers count what they would have).
std::pair<std::uint64_t, std::uint64_t> swap_bytes(Training& t) {
  std::uint64_t r = 0, w = 0;
  auto add = [&](const offload::Swapper& s) {
    r += s.stats().bytes_read;
    w += s.stats().bytes_written;
  };
  if (auto* s = dynamic_cast<const offload::NvmeStateStore*>(&t.trainer().states()))
    add(s->swapper());
  if (auto* v = dynamic_cast<const offload::NvmeValueShardStore*>(t.store().options().value_store.get()))
    add(v->swapper());
  if (auto* g = dynamic_cast<const offload::NvmeValueShardStore*>(t.store().options().grad_store.get()))
    add(g->swapper());
  return {r, w};
}

// The plan of one rank of the world (its memory, traffic and model size).
MemoryPlan plan_rank(const config::Config& cfg, const ModelFactory& make_model,
                     const PlanOptions& opts, int rank) {
  config::Config c = cfg;
  MemoryPlan out;
  out.ranks = opts.ranks;
  out.caps = {c.strata.memory.device_limit, c.strata.memory.host_limit, c.strata.memory.nvme_limit};
  // The plan's own ledger is uncapped (it measures the need); no checkpoints, no recovery.
  c.strata.memory = {};
  c.strata.memory.on_oom = config::OnOom::fail;
  c.strata.checkpoint = {};
  c.strata.checkpoint.resume = "none";
  MemoryLedger ledger;
  std::unique_ptr<nn::Model> model = make_model(c);
  TrainingExtras extras = TrainingExtras::on(&ledger);
  // A GPU job's device tier is planned on meta_cuda(): its ops are charged the workspace the CUDA
  // backend's ops allocate, not the CPU's (meta_device.hpp). Its host tier stays Device::meta():
  // what runs there (an offloaded update) runs on the CPU backend.
  extras.device = cfg.strata.device == DeviceType::cuda && !opts.cpu_ops ? meta_cuda() : Device::meta();
  Training job(c, planning_world(opts.ranks, rank), *model, extras);
  out.micro_batch = static_cast<int>(job.config().train_micro_batch_size_per_gpu);
  out.accumulation = static_cast<int>(job.config().gradient_accumulation_steps);
  out.parameters = job.store().total_numel();
  out.recompute = c.strata.activation_checkpointing;
  if (const auto fields = model->batch_fields(1); !fields.empty())
    out.tokens_per_sample = std::max<std::int64_t>(1, fields.front().shape.numel());
  const auto no_data = [](nn::Batch&) {};  // zeros: token 0 is in every vocabulary
  job.step(no_data);  // the first step (offload stores start their read-ahead for the next)
  const CommVolume v0 = job.engine().zero().volume();
  const auto [r0, w0] = swap_bytes(job);
  for (int s = 1; s < opts.steps; ++s) job.step(no_data);
  out.memory = ledger.snapshot();
  // Per-step traffic: the last step's (the first step's when only one ran).
  const CommVolume v1 = job.engine().zero().volume();
  const auto [r1, w1] = swap_bytes(job);
  const bool one = opts.steps == 1;
  out.comm.all_reduce = one ? v1.all_reduce : v1.all_reduce - v0.all_reduce;
  out.comm.reduce_scatter = one ? v1.reduce_scatter : v1.reduce_scatter - v0.reduce_scatter;
  out.comm.all_gather = one ? v1.all_gather : v1.all_gather - v0.all_gather;
  if (opts.steps > 1) {
    const std::uint64_t steps = static_cast<std::uint64_t>(opts.steps - 1);
    out.comm.all_reduce /= steps;
    out.comm.reduce_scatter /= steps;
    out.comm.all_gather /= steps;
  }
  out.nvme_read = one ? r1 : (r1 - r0) / static_cast<std::uint64_t>(opts.steps - 1);
  out.nvme_written = one ? w1 : (w1 - w0) / static_cast<std::uint64_t>(opts.steps - 1);
  // Host <-> device per step: an offloaded optimizer takes the owned gradient slices down and
  // gives the updated 16-bit (or f32) parameter slices back; offloaded parameter slices come up
  // for every gather (an all-gather of N slices moves one of them from this rank's host).
  const auto& z = c.zero_optimization;
  const auto& store = job.store();
  const std::uint64_t pb = dtype_size(store.options().param_dtype);
  if (z.offload_optimizer.device != config::OffloadDevice::none) {
    std::uint64_t owned = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u)
      owned += static_cast<std::uint64_t>(store.layout(u).hi - store.layout(u).lo);
    out.host_transfer += 2 * owned * pb;
  }
  if (z.offload_param.device != config::OffloadDevice::none)
    out.host_transfer += out.comm.all_gather / static_cast<std::uint64_t>(job.dp().size());
  return out;
}

// The larger of two ranks' figures, field by field: what the busiest rank needs.
void take_max(MemoryPlan& a, const MemoryPlan& b) {
  auto mx = [](auto& x, const auto& y) { x = std::max(x, y); };
  for (std::size_t t = 0; t < kNumTiers; ++t) {
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      mx(a.memory.peak[t][c], b.memory.peak[t][c]);
      mx(a.memory.current[t][c], b.memory.current[t][c]);
    }
    mx(a.memory.tier_peak[t], b.memory.tier_peak[t]);
    mx(a.memory.tier_current[t], b.memory.tier_current[t]);
  }
  mx(a.comm.all_reduce, b.comm.all_reduce);
  mx(a.comm.reduce_scatter, b.comm.reduce_scatter);
  mx(a.comm.all_gather, b.comm.all_gather);
  mx(a.nvme_read, b.nvme_read);
  mx(a.nvme_written, b.nvme_written);
  mx(a.host_transfer, b.host_transfer);
}

}  // namespace

MemoryPlan plan_memory(const config::Config& cfg, const ModelFactory& make_model,
                       const PlanOptions& opts) {
  STRATA_CHECK(make_model, "plan", "no model to plan");
  STRATA_CHECK(opts.steps >= 1, "plan", "a plan runs at least one step, not {}", opts.steps);
  // Data-parallel ranks and tensor-parallel parts hold the same amounts; pipeline stages do not
  // (the first holds the embedding, the last the head and the loss): each stage's first rank is
  // planned (Megatron's order puts stage s at ranks s × ranks/pp onwards) and the plan is the
  // busiest one's, per tier × category.
  const std::int64_t pp = std::max<std::int64_t>(1, cfg.strata.pipeline_parallel_size);
  MemoryPlan out = plan_rank(cfg, make_model, opts, 0);
  for (std::int64_t s = 1; s < pp && opts.ranks % pp == 0; ++s)
    take_max(out, plan_rank(cfg, make_model, opts, static_cast<int>(s * (opts.ranks / pp))));
  return out;
}

}  // namespace strata::parallel::plan
