#include "parallel/engine/dp_engine.hpp"

#include <chrono>

namespace strata::parallel {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

DataParallelEngine::DataParallelEngine(Group dp, nn::Model& model, nn::ParamStore& store,
                                       train::Trainer& trainer, const EngineOptions& opts,
                                       nn::Context ctx)
    : dp_(std::move(dp)),
      model_(model),
      store_(store),
      trainer_(trainer),
      opts_(opts),
      hooks_(store, dp_, opts.zero, model.unit_schedule()),
      ctx_(ctx) {
  STRATA_CHECK(opts.micro_batch >= 1 && opts.accumulation >= 1, "engine",
               "micro batch {} and accumulation {} must both be >= 1", opts.micro_batch,
               opts.accumulation);
  ctx_.hooks = &hooks_;
  batch_ = nn::Batch(model.batch_fields(opts.micro_batch));
}

train::ShardReductions dp_reductions(const Group& dp) {
  train::ShardReductions r;
  r.sum = [dp](double v) { return dp.all_reduce_value(v, ReduceOp::sum); };
  r.any = [dp](bool b) { return dp.all_reduce_value<std::int32_t>(b ? 1 : 0, ReduceOp::max) != 0; };
  return r;
}

nn::Context DataParallelEngine::eval_context() const {
  nn::Context c = ctx_;
  c.grad_enabled = false;
  return c;
}

double DataParallelEngine::io_wait_seconds() const {
  double s = trainer_.states().io_wait_seconds();
  if (const auto& vs = store_.options().value_store) s += vs->io_wait_seconds();
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
  for (int m = 0; m < opts_.accumulation; ++m) {
    hooks_.set_sync(m == opts_.accumulation - 1);
    next_batch(batch_);
    phase(t.forward, [&] { sum += model_.forward(ctx_, batch_); });
    phase(t.backward, [&] {
      model_.backward(ctx_, trainer_.loss_scale() / static_cast<float>(opts_.accumulation));
      hooks_.end_backward();
    });
  }
  phase(t.backward, [&] { hooks_.finish_gradients(); });
  phase(t.optimizer, [&] { out.result = trainer_.step(); });
  phase(t.optimizer, [&] { hooks_.after_step(); });
  out.local_loss = sum / opts_.accumulation;
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

}  // namespace strata::parallel
