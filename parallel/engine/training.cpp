#include "parallel/engine/training.hpp"

#include "framework/train/from_config.hpp"
#include "offload/factory.hpp"
#include "offload/value_shard_store.hpp"
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
  if (g.tp_size() > 1 || g.pp_size() > 1)
    user_fail("engine", "strata.tensor_parallel_size {} / strata.pipeline_parallel_size {}: only "
              "data parallelism is implemented so far; set both to 1", g.tp_size(), g.pp_size());
  return g;
}

}  // namespace

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
  eo.recover_oom = cfg.strata.memory.on_oom == config::OnOom::recover;
  return eo;
}

Training::Training(config::Config cfg, const Group& world, nn::Model& model, TrainingExtras extras)
    : cfg_(std::move(cfg)),
      model_(model),
      ledger_(extras.ledger ? *extras.ledger : MemoryLedger::global()),
      grid_(make_grid(cfg_, world)) {
  const bool planning = extras.device.is_meta();
  if (!planning) {
    // strata.device: "cuda" without a usable GPU (or CUDA kernels) is an error, never the CPU.
    // (A plan runs on the meta device whatever the config's device: it may be for another machine.)
    const Device device = train::compute_device(cfg_);
    STRATA_CHECK(device.is_cpu(), "engine", "device {} is not supported by the assembly yet", device.str());
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

  nn::ParamStoreOptions so =
      ZeroHooks::store_options(nn::ParamStoreOptions{pd, pd, 1, memory}, stage, dp);
  // ZeRO-3 parameter slices: on the device, or offloaded to host memory / NVMe swap files.
  so.value_store = extras.value_store ? std::move(extras.value_store)
                                      : offload::make_value_shard_store(cfg_, world.rank(), memory);
  STRATA_CHECK(!so.value_store || stage == 3, "engine",
               "parameter slices can be offloaded at ZeRO stage 3 only (stage is {})", stage);
  store_ = std::make_unique<nn::ParamStore>(model.units(), so);
  store_->initialize(cfg_.strata.seed);  // each rank initialises only what it stores
  // Optimizer state: beside the parameters, or offloaded to host memory / NVMe swap files.
  trainer_ = std::make_unique<train::Trainer>(
      *store_, train::trainer_options(cfg_),
      stage > 0 ? dp_reductions(dp) : train::ShardReductions{},
      offload::make_state_store(cfg_, world.rank(), memory));

  model.set_checkpointing(cfg_.strata.activation_checkpointing);
  nn::Context ctx;
  ctx.activations.device = extras.device;
  ctx.workspace.device = extras.device;
  ctx.activations.ledger = &ledger_;
  ctx.workspace.ledger = &ledger_;
  ctx.act_dtype = train::activation_dtype(cfg_);  // 16-bit with mixed precision by default
  engine_ = std::make_unique<DataParallelEngine>(dp, model, *store_, *trainer_,
                                                 engine_options(cfg_), ctx);
  checkpoints_ = std::make_unique<CheckpointPolicy>(cfg_, world, dp, *store_, *trainer_, stage);
}

Training::~Training() = default;

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
  const DType pd = store_->options().param_dtype;
  const double pb = static_cast<double>(dtype_size(pd));
  const double ob = (pd == DType::f32 ? 0.0 : 4.0) + 4.0 +
                    (cfg_.optimizer.type == config::OptimizerType::sgd ? 0.0 : 4.0);
  return zero_prediction(zero_stage(), grid_.dp_size(), psi, pb, pb, ob);
}

ModelStateBytes Training::measured_model_states() const {
  ModelStateBytes got;
  got.params = static_cast<double>(ledger_.current(Tier::device, Category::params));
  got.grads = static_cast<double>(ledger_.current(Tier::device, Category::grads));
  got.optimizer = static_cast<double>(ledger_.current(Tier::device, Category::optimizer));
  return got;
}

}  // namespace strata::parallel
