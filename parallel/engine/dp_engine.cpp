#include "parallel/engine/dp_engine.hpp"

#include <array>
#include <chrono>

#include "framework/memory/out_of_memory.hpp"

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
  return step_unit_schedule(*pipe.stage, stage_actions(*pipe.stage, opts.accumulation));
}

std::string first_line(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    const std::string w = x.what();
    return w.substr(0, w.find('\n'));
  } catch (...) {
    return "unknown error";
  }
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
      ctx_(ctx),
      micro_(opts.micro_batch) {
  STRATA_CHECK(opts.micro_batch >= 1 && opts.accumulation >= 1, "engine",
               "micro batch {} and accumulation {} must both be >= 1", opts.micro_batch,
               opts.accumulation);
  if (pipeline.stage)
    pipe_ = std::make_unique<PipelineExecutor>(std::move(pipeline), store, hooks_, opts.accumulation);
  STRATA_CHECK(!trainer.options().step_in_backward ||
                   (!pipe_ && hooks_.stage() >= 1 && !opts.recover_oom),
               "engine", "updating units in backward needs ZeRO stage >= 1 (stage {}), no pipeline "
               "and no out-of-memory recovery (a step cannot be redone after an update)",
               hooks_.stage());
  if (trainer.options().step_in_backward)  // each unit updated where its gradient is complete
    hooks_.on_reduced_gradient([this](std::size_t u, const Tensor& owned) {
      trainer_.step_unit(u, owned);
      return true;
    });
  else if (!pipe_)  // (a pipeline changes tied gradients after their reduction: its norm reads them)
    hooks_.on_reduced_gradient([this](std::size_t u, const Tensor& owned) {
      trainer_.note_final_gradient(u, owned);
      return false;
    });
  ctx_.hooks = &hooks_;
  // Host memory of the job's ledger: the data's micro-batch is part of what a rank holds.
  batch_ = nn::Batch(model.batch_fields(opts.micro_batch),
                     TensorOptions{Device::cpu(), Tier::host, Category::other,
                                   ctx_.activations.ledger});
  if (opts.recover_oom) oom_ = dp_.split(0, dp_.rank(), dp_.name() + ".oom");
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

double DataParallelEngine::eval_loss(const nn::Batch& given) {
  nn::Batch rounded;
  if (opts_.auto_cast_fp16) {  // every forward, as DeepSpeed's auto_cast
    rounded = given.clone();
    nn::round_inputs_to_fp16(rounded);
  }
  const nn::Batch& batch = opts_.auto_cast_fp16 ? rounded : given;
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

std::optional<MicroBatchChange> DataParallelEngine::set_micro_batch(int m, std::string why) {
  STRATA_CHECK(m >= 1 && opts_.micro_batch % m == 0, "engine",
               "micro-batch {} does not divide the data's micro-batch {}", m, opts_.micro_batch);
  if (m == micro_) return std::nullopt;
  std::vector<nn::Batch> parts;
  if (m != opts_.micro_batch) {
    const auto want = model_.batch_fields(m);
    for (int p = 0; p < opts_.micro_batch / m; ++p) {
      parts.push_back(batch_.rows(static_cast<std::int64_t>(p) * m, static_cast<std::int64_t>(p + 1) * m));
      for (std::size_t f = 0; f < want.size(); ++f)
        STRATA_CHECK(f < parts.back().fields().size() && parts.back().fields()[f].shape == want[f].shape,
                     "engine", "the model's batch field '{}' for micro-batch {} is not the first {} "
                     "samples of its micro-batch {}: the micro-batch cannot be split",
                     want[f].name, m, m, opts_.micro_batch);
    }
  }
  MicroBatchChange c{micro_, m, 0, std::move(why)};
  parts_ = std::move(parts);
  micro_ = m;
  c.accumulation = accumulation();
  return c;
}

EngineStep DataParallelEngine::run_step(const NextBatch& fill, bool& recoverable) {
  // fp16.auto_cast: the model sees its floating-point inputs rounded to fp16.
  const NextBatch next_batch =
      opts_.auto_cast_fp16 ? NextBatch([&fill](nn::Batch& b) {
        fill(b);
        nn::round_inputs_to_fp16(b);
      })
                           : fill;
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
  losses_.forget();
  hooks_.set_reduce_gradients(!trainer_.local_gradients_next());  // 1-bit Adam's compressed phase
  if (pipe_) {  // out-of-memory recovery is refused with a pipeline (Training checks)
    const float scale = trainer_.loss_scale() / static_cast<float>(opts_.accumulation);
    const double pw0 = pipe_->wait_seconds();
    pipe_->run(next_batch, batch_, ctx_, scale,
               [&](bool backward, const std::function<void()>& pass) {
                 phase(backward ? t.backward : t.forward, pass);
               });
    phase(t.backward, [&] { hooks_.finish_gradients(); });
    phase(t.backward, [&] { pipe_->reduce_tied_grads(); });
    t.pipeline_wait = pipe_->wait_seconds() - pw0;
    // The losses' read, begun at the end of run(), is finished after the step's read of its
    // gradient sums (one host wait for both on a GPU).
    phase(t.optimizer, [&] { out.result = trainer_.step(); });
    phase(t.optimizer, [&] { sum = pipe_->losses(); });
    phase(t.optimizer, [&] { hooks_.after_step(); });
    out.local_loss = pipe_->from_last_stage(sum) / opts_.accumulation;
  } else {
    const int pieces = opts_.micro_batch / micro_, n = opts_.accumulation * pieces;
    recoverable = true;
    for (int d = 0; d < opts_.accumulation; ++d) {
      next_batch(batch_);
      for (int p = 0; p < pieces; ++p) {
        hooks_.set_sync(d * pieces + p == n - 1);
        const nn::Batch& b = pieces == 1 ? batch_ : parts_[static_cast<std::size_t>(p)];
        phase(t.forward, [&] { losses_.add(model_.forward_loss(ctx_, b)); });
        phase(t.backward, [&] {
          model_.backward(ctx_, trainer_.loss_scale() / static_cast<float>(n));
          hooks_.end_backward();
        });
      }
    }
    recoverable = false;
    if (opts_.recover_oom) agree_out_of_memory(false, nullptr);
    phase(t.backward, [&] { hooks_.finish_gradients(); });
    // The losses' host read is begun (a copy queued) before the step's read of its gradient
    // sums and finished after it: on a GPU the host waits once, in the step, for both.
    phase(t.backward, [&] { losses_.begin_read(); });
    phase(t.optimizer, [&] { out.result = trainer_.step(); });
    phase(t.optimizer, [&] { sum = losses_.total(); });
    phase(t.optimizer, [&] { hooks_.after_step(); });
    out.local_loss = sum / n;
  }
  out.loss = mean_over_dp(out.local_loss);
  t.total = since(step0);
  return out;
}

bool DataParallelEngine::agree_out_of_memory(bool mine, const std::exception_ptr& error) const {
  std::array<std::int32_t, 2> v{mine ? 1 : 0, mine ? -1 : 0};  // max of flags, -(min of flags)
  try {
    v = oom_.all_reduce_values(v, ReduceOp::max);
  } catch (const Error& e) {
    if (!mine) throw;
    fail("engine", "{}; out-of-memory recovery needs every rank to run out at the same point, but "
         "the other ranks did not come to agree on it: {}", first_line(error), e.what());
  }
  const bool any = v[0] > 0, all = v[1] < 0;
  if (any && !all)
    fail("engine", "rank {} of {} {} out of memory in this step's forward/backward, but not every "
         "rank did: the ranks' memory differs, so they cannot split the micro-batch together; "
         "give every rank the same caps (or set strata.memory.on_oom to \"fail\")",
         dp_.rank(), dp_.describe(), mine ? "ran" : "did not run; another rank ran");
  return all;
}

EngineStep DataParallelEngine::train_step(const NextBatch& next_batch) {
  bool recoverable = false;
  try {
    return run_step(next_batch, recoverable);
  } catch (const OutOfMemory& e) {
    if (!opts_.recover_oom || !recoverable) throw;
    throw UserError("engine", fmt::format(
        "{} — strata.memory.on_oom is \"recover\" but this program feeds micro-batches without a "
        "resumable data source, so the step cannot be redone (train with Training::step(nn::"
        "BatchSource&)); set strata.memory.on_oom to \"fail\" to get the error alone",
        std::string(e.what()).substr(0, std::string(e.what()).find('\n'))));
  }
}

EngineStep DataParallelEngine::train_step(nn::BatchSource& data) {
  const data::SamplerState start = data.state();
  std::vector<MicroBatchChange> changes;
  for (;;) {
    bool recoverable = false;
    std::exception_ptr error;
    try {
      EngineStep s = run_step([&](nn::Batch& b) { data.next(b); }, recoverable);
      s.micro_batch_changes = std::move(changes);
      return s;
    } catch (const OutOfMemory&) {
      if (!opts_.recover_oom || !recoverable) throw;
      error = std::current_exception();
    }
    // Unwound to here: the step's activations are gone with its stack; drop what forward saved
    // and what the ZeRO hooks hold, then agree with the other ranks before trying again.
    ctx_.saved->clear();
    hooks_.abort_step();
    trainer_.forget_final_gradients();
    agree_out_of_memory(true, error);
    if (micro_ == 1) std::rethrow_exception(error);  // nothing left to split
    int m = micro_ / 2;
    while (m > 1 && opts_.micro_batch % m != 0) --m;  // the largest divisor at most half
    changes.push_back(*set_micro_batch(m, first_line(error)));
    data.set_state(start);
  }
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
