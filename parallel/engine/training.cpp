#include "parallel/engine/training.hpp"

#include <cstdlib>

#include "framework/backend/math_mode.hpp"
#include "framework/core/meta_device.hpp"
#include "framework/nn/batch_device.hpp"
#include "framework/nn/interleaved_stage.hpp"
#include "framework/train/from_config.hpp"
#include "offload/factory.hpp"
#include "offload/value_shard_store.hpp"
#include "parallel/comm/compressed_allreduce.hpp"
#include "parallel/engine/tp_comm.hpp"
#include "parallel/plan/auto_micro_batch.hpp"
#include "parallel/plan/oom_advice.hpp"

namespace strata::parallel {

namespace {

int checked_int(std::int64_t v, const char* what) {
  if (v < 1 || v > (1 << 30)) user_fail("config", "{} is {}; it must be between 1 and 2^30", what, v);
  return static_cast<int>(v);
}

// The grid first: the batch arithmetic needs its data-parallel size.
Grid make_grid(const config::Config& cfg, const Group& world) {
  Grid g(world, checked_int(cfg.strata.tensor_parallel_size, "strata.tensor_parallel_size"),
         checked_int(cfg.strata.pipeline_parallel_size, "strata.pipeline_parallel_size"));
  if (cfg.strata.sequence_parallel && g.tp_size() == 1)
    user_fail("engine", "strata.sequence_parallel is true but strata.tensor_parallel_size is 1: "
              "sequence parallelism splits the tokens over the tensor-parallel ranks; set "
              "strata.sequence_parallel to false, or tensor_parallel_size to 2 or more");
  // What the optimizer refuses, as it declares it.
  const auto opt = train::trainer_options(cfg).optimizer;
  const optim::Refusals& no = opt->declaration().refusals;
  if (g.tp_size() > 1 && !no.tensor_parallel.empty())
    user_fail("engine", "optimizer.type {} with strata.tensor_parallel_size {} is not "
              "implemented ({}): use {}, or tensor parallel size 1", opt->name(), g.tp_size(),
              no.tensor_parallel, optim::optimizer_names(
                                      [](const optim::Declaration& d) {
                                        return d.refusals.tensor_parallel.empty() &&
                                               d.refusals.model_parallel.empty();
                                      },
                                      "or"));
  if (cfg.zero_optimization.stage != 0 && !no.zero.empty())
    user_fail("engine", "optimizer.type {} with zero_optimization.stage {} is not supported ({}); "
              "set zero_optimization.stage to 0", opt->name(), cfg.zero_optimization.stage, no.zero);
  if ((g.tp_size() > 1 || g.pp_size() > 1) && !no.model_parallel.empty())
    user_fail("engine", "optimizer.type {} with tensor or pipeline parallelism (sizes {} and {}) "
              "is not implemented ({}): set both to 1", opt->name(), g.tp_size(), g.pp_size(),
              no.model_parallel);
  if (cfg.strata.memory.on_oom == config::OnOom::recover && (g.tp_size() > 1 || g.pp_size() > 1))
    user_fail("engine", "strata.memory.on_oom \"recover\" with strata.tensor_parallel_size {} and "
              "strata.pipeline_parallel_size {} is not implemented (the ranks of a tensor- or "
              "pipeline-parallel group would have to split their micro-batch together); set "
              "strata.memory.on_oom to \"fail\", or both sizes to 1", g.tp_size(), g.pp_size());
  return g;
}

// The model must have been built as this rank's tensor-parallel part.
void check_tensor_shard(const nn::Model& model, const Grid& grid, bool sequence_parallel) {
  const nn::TpShard want{grid.coords().tp, grid.tp_size(), sequence_parallel};
  const nn::TpShard got = model.tensor_shard();
  if (got.sequence_parallel != want.sequence_parallel && got.index == want.index && got.size == want.size)
    user_fail("engine", "the model was built {} sequence parallelism but strata.sequence_parallel "
              "is {}: build it with parallel::tensor_shard(config, world)",
              got.sequence_parallel ? "with" : "without", want.sequence_parallel);
  if (got != want)
    user_fail("engine", "the model was built as tensor-parallel part {} of {} but this rank is "
              "part {} of {} (strata.tensor_parallel_size {}): build it with "
              "parallel::tensor_shard(config, world)", got.index, got.size, want.index, want.size,
              grid.tp_size());
}

// What checkpoints need to know of this rank's pipeline stage.
CheckpointStage checkpoint_stage(const Grid& grid, nn::Model& model, const nn::ModelStage* stage) {
  CheckpointStage cs;
  cs.tp = grid.tp_size();
  cs.tp_index = grid.coords().tp;
  if (!stage) return cs;
  cs.pp = grid.pp_size();
  cs.index = stage->index();
  for (const nn::Parameter* p : model.parameters())
    cs.model.push_back({p->name, p->placement.global_shape(p->shape)});  // a tp part: the whole
  for (const nn::TiedUnit& t : stage->tied_units())
    if (!t.owner) cs.copies.push_back(static_cast<std::size_t>(t.unit));
  return cs;
}

}  // namespace

nn::Recompute recompute_mode(config::Recompute r) {
  switch (r) {
    case config::Recompute::none:
      return nn::Recompute::none;
    case config::Recompute::selective:
      return nn::Recompute::selective;
    case config::Recompute::full:
      return nn::Recompute::full;
  }
  return nn::Recompute::none;
}

nn::TpShard tensor_shard(const config::Config& cfg, const Group& world) {
  const int tp = checked_int(cfg.strata.tensor_parallel_size, "strata.tensor_parallel_size");
  // Megatron's order: tensor-parallel ranks are adjacent.
  return {world.rank() % tp, tp, cfg.strata.sequence_parallel};
}

EngineOptions engine_options(const config::Config& cfg) {
  EngineOptions eo;
  eo.micro_batch = checked_int(cfg.train_micro_batch_size_per_gpu, "train_micro_batch_size_per_gpu");
  eo.accumulation = checked_int(cfg.gradient_accumulation_steps, "gradient_accumulation_steps");
  const auto& z = cfg.zero_optimization;
  eo.zero.stage = z.stage;
  eo.zero.bucket_elements = z.reduce_bucket_size;
  eo.zero.allgather_bucket_elements = z.allgather_bucket_size;
  eo.zero.overlap = z.overlap_comm;
  eo.zero.prefetch_elements = z.stage3_prefetch_bucket_size;
  eo.zero.max_live_elements = z.stage3_max_live_parameters;
  eo.zero.persistence_threshold = z.stage3_param_persistence_threshold;
  eo.zero.max_reuse_distance = z.stage3_max_reuse_distance;
  eo.zero.prescale = cfg.prescale_gradients;
  eo.zero.predivide = cfg.gradient_predivide_factor;
  eo.recover_oom = cfg.strata.memory.on_oom == config::OnOom::recover;
  eo.auto_cast_fp16 = cfg.fp16.enabled && cfg.fp16.auto_cast;
  return eo;
}

namespace {

// This process's rank among those on its host (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, Slurm's
// SLURM_LOCALID, torchrun's LOCAL_RANK): the GPU it takes. The world's rank when none is set.
int local_rank(const Group& world) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return world.rank();
}

// A job on a GPU that gpu_refusal() names is one line naming it, never a silent CPU run.
void check_gpu_job(const config::Config& cfg, Device device) {
  if (const std::string what = gpu_refusal(cfg); !what.empty())
    user_fail("engine", "strata.device is \"cuda\" ({}) but {} does not run on a GPU yet: {}",
              device.str(), what, "set strata.device to \"cpu\" for this job");
}

}  // namespace

// What a job on a GPU can do today: data, tensor (with or without sequence parallelism) and
// pipeline parallelism over any number of ranks (their collectives and transfers on device buffers:
// NCCL where each rank has a GPU of its own, host-staged where ranks share one: Group's device
// transport), ZeRO 0-3, optimizer state and gradients offloaded to host memory or NVMe and ZeRO-3
// parameter slices too; with its state on the GPU an optimizer needs CUDA kernels (its
// refusals.gpu empty), with its state offloaded every optimizer runs (its update runs on the host);
// updates in backward (strata.optimizer_in_backward) with the state on the GPU; with offload
// from the GPU they are refused in the constructor below. docs/gpu.md.
std::string gpu_refusal(const config::Config& cfg) {
  // The optimizer's refusal applies where its state is on the GPU: offloaded, its update runs on
  // the host (train/value_staging.hpp).
  const auto opt = train::trainer_options(cfg).optimizer;
  const std::string& why = opt->declaration().refusals.gpu;
  if (!why.empty() && cfg.zero_optimization.offload_optimizer.device == config::OffloadDevice::none)
    return fmt::format("the {} optimizer with its state on the GPU ({}; "
                       "zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" runs it on "
                       "the host)", opt->name(), why);
  return "";
}

Training::Training(config::Config cfg, const Group& world, nn::Model& model, TrainingExtras extras)
    : cfg_(std::move(cfg)),
      model_(model),
      ledger_(extras.ledger ? *extras.ledger : MemoryLedger::global()),
      grid_(make_grid(cfg_, world)) {
  check_tensor_shard(model, grid_, cfg_.strata.sequence_parallel);
  const bool planning = extras.device.is_meta();
  if (!planning) {
    // strata.device: "cuda" without a usable GPU (or CUDA kernels) is an error, never the CPU.
    // (A plan runs on the meta device whatever the config's device: it may be for another machine.)
    const Device device = train::compute_device(cfg_, local_rank(world));
    if (device.is_cuda()) check_gpu_job(cfg_, device);
    extras.device = device;
    set_allow_tf32(cfg_.strata.allow_tf32);
    set_allow_rounded_attention(cfg_.strata.allow_rounded_attention);
  }
  if (extras.model_factory) plan::resolve_auto_micro_batch(cfg_, world.size(), extras.model_factory);
  config::resolve_batch(cfg_, grid_.dp_size());
  const int stage = cfg_.zero_optimization.stage;
  offload::validate(cfg_, stage, !planning);  // clear errors before any allocation
  if (extras.model_factory && !planning) {
    // Out-of-memory errors explain themselves with the memory planner from here on.
    advisor_restore_.previous = ledger_.advisor();
    ledger_.set_advisor(plan::planned_oom_advisor(cfg_, world.size(), extras.model_factory));
    advisor_restore_.ledger = &ledger_;
  }
  const Group& dp = grid_.dp();
  const DType pd = train::param_dtype(train::precision_of(cfg_));
  const TensorOptions memory{extras.device, Tier::device, Category::other, &ledger_};
  const train::TrainerOptions topts = train::trainer_options(cfg_);
  // An optimizer with blocks state (AdamW8bit): every owned slice whole blocks.
  const int pad = train::state_pad_multiple(topts, stage == 0 ? 1 : dp.size());
  nn::ParamStoreOptions so =
      ZeroHooks::store_options(nn::ParamStoreOptions{pd, pd, pad, memory}, stage, dp);
  // The device tier is a GPU's memory (or a plan for a GPU job: it takes the same paths, so it
  // counts the same buffers): what moves to and from the offload stores is staged and copied.
  so.host_staging = extras.device.is_cuda() || extras.host_staging ||
                    (planning && (cfg_.strata.device == DeviceType::cuda || is_meta_cuda(extras.device)));
  const bool offloads = cfg_.zero_optimization.offload_optimizer.device != config::OffloadDevice::none ||
                        cfg_.zero_optimization.offload_param.device != config::OffloadDevice::none;
  if (so.host_staging && offloads && cfg_.strata.optimizer_in_backward)
    user_fail("engine", "strata.optimizer_in_backward with offload from a GPU's memory is not "
              "implemented (the update would read gradients on their way to the host): set "
              "strata.optimizer_in_backward to false");
  // ZeRO-3 parameter slices: on the device, or offloaded to host memory / NVMe swap files.
  so.value_store = extras.value_store ? std::move(extras.value_store)
                                      : offload::make_value_shard_store(cfg_, world.rank(), memory);
  STRATA_CHECK(!so.value_store || stage == 3, "engine",
               "parameter slices can be offloaded at ZeRO stage 3 only (stage is {})", stage);
  // Gradients go where the optimizer runs: with offload_optimizer, to host memory or NVMe right
  // after each unit's backward (and reduction).
  // With pipeline stages they stay on the device for now: the stages' tied-embedding gradient sum
  // reads them there (docs/offload.md).
  if (grid_.pp_size() == 1) so.grad_store = offload::make_grad_shard_store(cfg_, world.rank(), memory);
  // With pipeline stages this rank holds (and runs) only its stage's units.
  // With strata.virtual_pipeline_stages v > 1 a rank holds v chunks of the model cut into pp * v.
  const int chunks = checked_int(cfg_.strata.virtual_pipeline_stages, "strata.virtual_pipeline_stages");
  if (chunks > 1 && grid_.pp_size() == 1)
    user_fail("engine", "strata.virtual_pipeline_stages {} needs strata.pipeline_parallel_size 2 or "
              "more (it is 1): set strata.virtual_pipeline_stages to 1", chunks);
  if (grid_.pp_size() > 1)
    stage_ = chunks > 1 ? std::make_unique<nn::InterleavedStage>(model, grid_.coords().pp,
                                                                 grid_.pp_size(), chunks)
                        : model.stage(grid_.coords().pp, grid_.pp_size());
  store_ = std::make_unique<nn::ParamStore>(stage_ ? stage_->units() : model.units(), so);
  store_->initialize(cfg_.strata.seed);  // each rank initialises only what it stores
  // Optimizer state: beside the parameters, or offloaded to host memory / NVMe swap files.
  train::ShardReductions reductions = stage > 0 ? dp_reductions(dp) : train::ShardReductions{};
  reductions = tp_reductions(std::move(reductions), grid_.tp());
  if (topts.optimizer->declaration().compressed_exchange && dp.size() > 1) {
    // The optimizer's compressed exchange: past its freeze_step each rank's gradients are its own,
    // so overflow is decided over dp (every rank skips the same steps), and its momenta go through
    // the compressed all-reduce.
    reductions.any = dp_reductions(dp).any;
    reductions.ranks = dp.size();
    reductions.compressed_average = [dp](std::span<const optim::ErrorFeedbackTensor> t) {
      compressed_allreduce(dp, t);
    };
  }
  if (stage_) reductions = pipeline_reductions(std::move(reductions), grid_.pp(), *stage_);
  trainer_ = std::make_unique<train::Trainer>(*store_, topts,
                                              std::move(reductions),
                                              offload::make_state_store(cfg_, world.rank(), memory));

  model.set_recompute(recompute_mode(cfg_.strata.activation_checkpointing));
  nn::Context ctx;
  ctx.activations.device = extras.device;
  ctx.workspace.device = extras.device;
  ctx.activations.ledger = &ledger_;
  ctx.workspace.ledger = &ledger_;
  ctx.act_dtype = train::activation_dtype(cfg_);  // 16-bit with mixed precision by default
  ctx.uploads = std::make_shared<nn::BatchUploads>();  // a GPU's batch copied without waiting
  if (grid_.tp_size() > 1) {
    tp_comm_ = std::make_unique<GroupTpComm>(grid_.tp());
    ctx.tp = tp_comm_.get();
  }
  PipelineSetup pipeline;
  if (stage_)
    pipeline = {stage_.get(), grid_.pp(),
                pipeline_tied_group(grid_, !stage_->tied_units().empty())};
  engine_ = std::make_unique<DataParallelEngine>(dp, model, *store_, *trainer_,
                                                 engine_options(cfg_), ctx, std::move(pipeline));
  checkpoints_ = std::make_unique<CheckpointPolicy>(cfg_, world, dp, *store_, *trainer_, stage,
                                                    checkpoint_stage(grid_, model, stage_.get()));
}

Training::~Training() = default;

namespace {
OptimizerStateBytes optimizer_bytes(const nn::ParamStore& store, const train::Trainer& trainer) {
  std::vector<Shape> shapes;
  for (const nn::Parameter* p : store.parameters()) shapes.push_back(p->shape);
  return optimizer_state_bytes(trainer.optimizer(), store.options().param_dtype != DType::f32,
                               shapes, trainer.error_ranks());
}
}  // namespace

EngineStep Training::step(nn::BatchSource& data) {
  std::vector<MicroBatchChange> resumed;
  if (!resumed_micro_batch_applied_) {
    // A resumed run that had recovered from running out of memory keeps its micro-batch.
    resumed_micro_batch_applied_ = true;
    const auto& extra = checkpoints_->resumed_extra();
    if (extra.contains("micro_batch") && extra["micro_batch"].is_number_integer()) {
      const int m = extra["micro_batch"].get<int>();
      if (m >= 1 && engine_->options().micro_batch % m == 0) {
        if (auto c = engine_->set_micro_batch(m, "resumed from a checkpoint of a run that had recovered from running out of memory"))
          resumed.push_back(*c);
      }
    }
  }
  EngineStep s = engine_->train_step(data);
  s.micro_batch_changes.insert(s.micro_batch_changes.begin(), resumed.begin(), resumed.end());
  if (!s.micro_batch_changes.empty())
    checkpoints_->put_extra("micro_batch", engine_->micro_batch());
  return s;
}

ModelStateBytes Training::predicted_model_states() const {
  double psi = 0;
  for (std::size_t u = 0; u < store_->num_units(); ++u)
    psi += static_cast<double>(store_->layout(u).padded);
  const double pb = static_cast<double>(dtype_size(store_->options().param_dtype));
  const OptimizerStateBytes ob = optimizer_bytes(*store_, *trainer_);
  return zero_prediction(zero_stage(), grid_.dp_size(), psi, pb, pb, ob.per_element, ob.replicated);
}

std::string Training::optimizer_state_description() const {
  return describe(trainer_->optimizer(), store_->options().param_dtype != DType::f32,
                  optimizer_bytes(*store_, *trainer_));
}

ModelStateBytes Training::measured_model_states() const {
  ModelStateBytes got;
  got.params = static_cast<double>(ledger_.current(Tier::device, Category::params));
  got.grads = static_cast<double>(ledger_.current(Tier::device, Category::grads));
  got.optimizer = static_cast<double>(ledger_.current(Tier::device, Category::optimizer));
  return got;
}

}  // namespace strata::parallel
