#include "parallel/engine/dp_engine.hpp"

#include <chrono>

namespace strata::parallel {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The order of unit uses the hooks follow: one micro-batch of the model, or a pipeline stage's
// whole step under its schedule.
std::vector<nn::UnitUse> unit_uses(const nn::Model& model, const PipelineSetup& pipe,
                                   const EngineOptions& opts) {
  if (!pipe.stage) return model.unit_schedule();
  STRATA_CHECK(opts.accumulation >= 1, "engine", "accumulation {} must be >= 1", opts.accumulation);
  return step_unit_schedule(*pipe.stage, pipeline::one_f_one_b(pipe.stage->count(),
                                                                pipe.stage->index(),
                                                                opts.accumulation));
}
}  // namespace

DataParallelEngine::DataParallelEngine(Group dp, nn::Model& model, nn::ParamStore& store,
                                       train::Trainer& trainer, const EngineOptions& opts,
                                       nn::Context ctx, PipelineSetup pipeline)
    : dp_(std::move(dp)),
      model_(model),
      store_(store),
      trainer_(trainer),
      opts_(opts),
      hooks_(store, dp_, opts.zero, unit_uses(model, pipeline, opts)),
      ctx_(ctx) {
  STRATA_CHECK(opts.micro_batch >= 1 && opts.accumulation >= 1, "engine",
               "micro batch {} and accumulation {} must both be >= 1", opts.micro_batch,
               opts.accumulation);
  if (pipeline.stage)
    pipe_ = std::make_unique<PipelineExecutor>(std::move(pipeline), store, hooks_, opts.accumulation);
  ctx_.hooks = &hooks_;
  batch_ = nn::Batch(model.batch_fields(opts.micro_batch));
}

DataParallelEngine::~DataParallelEngine() = default;

train::ShardReductions dp_reductions(const Group& dp) {
  train::ShardReductions r;
  r.sum = [dp](double v) { return dp.all_reduce_value(v, ReduceOp::sum); };
  r.sum_vector = [dp](std::span<double> v) {
    if (!v.empty()) dp.all_reduce(span(v.data(), v.size()), span(v.data(), v.size()), ReduceOp::sum).wait();
  };
  r.any = [dp](bool b) { return dp.all_reduce_value<std::int32_t>(b ? 1 : 0, ReduceOp::max) != 0; };
  return r;
}

nn::Context DataParallelEngine::eval_context() const {
  nn::Context c = ctx_;
  c.grad_enabled = false;
  return c;
}

double DataParallelEngine::eval_loss(const nn::Batch& batch) {
  if (pipe_) return pipe_->eval_loss(batch, eval_context());
  nn::Context c = eval_context();
  return model_.forward(c, batch);
}

double DataParallelEngine::io_wait_seconds() const {
  double s = trainer_.states().io_wait_seconds();
  if (const auto& vs = store_.options().value_store) s += vs->io_wait_seconds();
  if (const auto& gs = store_.options().grad_store) s += gs->io_wait_seconds();
  return s;
}

EngineStep DataParallelEngine::train_step(const NextBatch& next_batch) {
  EngineStep out;
  StepTimes& t = out.times;
  const auto step0 = Clock::now();
  // Waits are measured by the hooks and the stores; each phase's own time excludes them.
  auto waits = [&] { return std::pair{hooks_.comm_wait_seconds(), io_wait_seconds()}; };
  auto phase = [&](double& into, auto&& f) {
    const auto [c0, o0] = waits();
    const auto p0 = Clock::now();
    f();
    const auto [c1, o1] = waits();
    t.comm_wait += c1 - c0;
    t.offload_wait += o1 - o0;
    into += since(p0) - (c1 - c0) - (o1 - o0);
  };
  double sum = 0;
  ctx_.saved->clear();  // nothing left from a step that failed half-way
  const float scale = trainer_.loss_scale() / static_cast<float>(opts_.accumulation);
  hooks_.set_reduce_gradients(!trainer_.local_gradients_next());  // 1-bit Adam's compressed phase
  if (pipe_) {
    const double pw0 = pipe_->wait_seconds();
    sum = pipe_->run(next_batch, batch_, ctx_, scale,
                     [&](bool backward, const std::function<void()>& pass) {
                       phase(backward ? t.backward : t.forward, pass);
                     });
    phase(t.backward, [&] { hooks_.finish_gradients(); });
    phase(t.backward, [&] { pipe_->reduce_tied_grads(); });
    t.pipeline_wait = pipe_->wait_seconds() - pw0;
  } else {
    for (int m = 0; m < opts_.accumulation; ++m) {
      hooks_.set_sync(m == opts_.accumulation - 1);
      next_batch(batch_);
      phase(t.forward, [&] { sum += model_.forward(ctx_, batch_); });
      phase(t.backward, [&] {
        model_.backward(ctx_, scale);
        hooks_.end_backward();
      });
    }
    phase(t.backward, [&] { hooks_.finish_gradients(); });
  }
  phase(t.optimizer, [&] { out.result = trainer_.step(); });
  phase(t.optimizer, [&] { hooks_.after_step(); });
  out.local_loss = (pipe_ ? pipe_->from_last_stage(sum) : sum) / opts_.accumulation;
  out.loss = mean_over_dp(out.local_loss);
  t.total = since(step0);
  return out;
}

double DataParallelEngine::mean_over_dp(double v) const {
  return dp_.all_reduce_value(v, ReduceOp::avg);
}

double DataParallelEngine::max_over_dp(double v) const {
  return dp_.all_reduce_value(v, ReduceOp::max);
}

double DataParallelEngine::max_over_ranks(double v) const {
  const double m = max_over_dp(v);
  return pipe_ ? pipe_->pp().all_reduce_value(m, ReduceOp::max) : m;
}

}  // namespace strata::parallel
