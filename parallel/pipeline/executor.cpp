#include "parallel/pipeline/executor.hpp"

#include <chrono>

#include "framework/backend/stream.hpp"
#include "parallel/pipeline/simulate.hpp"

namespace strata::parallel {

namespace {

// Tags on the pipeline group: the activation and the gradient of micro-batch i crossing the
// boundary after virtual stage b of V (mod 16383, in order: MPI matches messages between two
// ranks with the same tag in the order they were posted). With interleaving two ranks share
// several boundaries (pp 2: rank 0 -> 1 after virtual stages 0 and 2).
int boundary_key(int micro, int boundary, int virtuals) { return (micro * virtuals + boundary) % 16383; }
int activation_tag(int micro, int boundary, int virtuals) {
  return 2 * boundary_key(micro, boundary, virtuals);
}
int gradient_tag(int micro, int boundary, int virtuals) {
  return 2 * boundary_key(micro, boundary, virtuals) + 1;
}
constexpr int kEvalTag = 32766;

}  // namespace

Group pipeline_tied_group(const Grid& grid, bool has_tied) {
  const GridCoords c = grid.coords();
  const int positions = grid.dp_size() * grid.tp_size();
  const int color = has_tied ? c.dp * grid.tp_size() + c.tp : positions + grid.world().rank();
  return grid.world().split(color, c.pp, "pp_tied");
}

std::vector<nn::UnitUse> step_unit_schedule(const nn::ModelStage& stage,
                                            const std::vector<pipeline::Action>& actions) {
  // Each chunk's forward and backward parts of one micro-batch.
  std::vector<std::vector<nn::UnitUse>> fwd(static_cast<std::size_t>(stage.chunks())), bwd = fwd;
  for (int c = 0; c < stage.chunks(); ++c)
    for (const nn::UnitUse& u : stage.chunk_unit_schedule(c))
      (u.backward ? bwd : fwd)[static_cast<std::size_t>(c)].push_back(u);
  std::vector<nn::UnitUse> out;
  for (const pipeline::Action& a : actions) {
    const auto& part = (a.pass == pipeline::Pass::forward ? fwd : bwd)[static_cast<std::size_t>(a.chunk)];
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

train::ShardReductions pipeline_reductions(train::ShardReductions inner, const Group& pp,
                                           const nn::ModelStage& stage) {
  train::ShardReductions r;
  r.sum = [inner, pp](double v) { return pp.all_reduce_value(inner.sum(v), ReduceOp::sum); };
  r.any = [inner, pp](bool b) {
    return pp.all_reduce_value<std::int32_t>(inner.any(b) ? 1 : 0, ReduceOp::max) != 0;
  };
  r.sum_vector = inner.sum_vector;  // Adafactor's statistics: a matrix lives on one stage
  r.counted_elsewhere = inner.counted_elsewhere;
  r.count_replicated = inner.count_replicated;  // tensor-parallel parts inside each stage
  for (const nn::TiedUnit& t : stage.tied_units())
    if (!t.owner) r.counted_elsewhere.push_back(static_cast<std::size_t>(t.unit));
  return r;
}

PipelineExecutor::PipelineExecutor(PipelineSetup setup, nn::ParamStore& store, ZeroHooks& hooks,
                                   int micro_batches)
    : setup_(std::move(setup)), store_(store), hooks_(hooks), micro_batches_(micro_batches) {
  STRATA_CHECK(setup_.stage && setup_.pp.valid() && setup_.tied.valid(), "pipeline",
               "a pipeline needs a stage, its pipeline group and its tied group");
  const nn::ModelStage& s = *setup_.stage;
  STRATA_CHECK(setup_.pp.size() == s.count() && setup_.pp.rank() == s.index(), "pipeline",
               "stage {} of {} on rank {} of the pipeline group {}", s.index(), s.count(),
               setup_.pp.rank(), setup_.pp.describe());
  actions_ = stage_actions(s, micro_batches);
}

std::vector<pipeline::Action> stage_actions(const nn::ModelStage& stage, int micro_batches) {
  return pipeline::interleaved_one_f_one_b(stage.count(), stage.index(), micro_batches,
                                           stage.chunks());
}

void PipelineExecutor::wait(const Work& w) {
  const auto t0 = std::chrono::steady_clock::now();
  w.wait();
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void PipelineExecutor::wait_on(const Work& w, const Tensor& t) {
  const auto t0 = std::chrono::steady_clock::now();
  w.wait_on(current_stream(t.device()));
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void PipelineExecutor::run(const NextBatch& next, nn::Batch& batch, nn::Context& ctx,
                           float scale, const Compute& compute) {
  nn::ModelStage& stage = *setup_.stage;
  const Group& pp = setup_.pp;
  const int me = stage.index(), P = stage.count(), chunks = stage.chunks(), V = P * chunks;
  const int before = (me + P - 1) % P, after = (me + 1) % P;  // the neighbouring ranks (a ring)
  const std::shared_ptr<nn::SavedState> outside = ctx.saved;
  // The virtual stage of this rank's chunk c: c * pp + me.
  auto virt = [&](int chunk) { return chunk * P + me; };
  // Receives, by action: posted one action ahead so that the transfer overlaps compute.
  struct Incoming {
    Tensor buf;
    Work work;
  };
  std::vector<Incoming> incoming(actions_.size());
  const Shape in_shape = stage.input_shape(batch), out_shape = stage.output_shape(batch);
  auto post = [&](std::size_t k) {
    if (k >= actions_.size() || !actions_[k].recv || incoming[k].buf.defined()) return;
    const pipeline::Action& a = actions_[k];
    const bool fw = a.pass == pipeline::Pass::forward;
    Tensor buf = ctx.act(fw ? in_shape : out_shape);
    incoming[k].work = fw ? pp.recv(buf, before, activation_tag(a.micro, virt(a.chunk) - 1, V))
                          : pp.recv(buf, after, gradient_tag(a.micro, virt(a.chunk), V));
    incoming[k].buf = std::move(buf);
  };
  auto take = [&](std::size_t k) {
    wait_on(incoming[k].work, incoming[k].buf);  // read by this action's kernels
    Tensor t = std::move(incoming[k].buf);
    incoming[k] = {};
    return t;
  };
  // Each chunk's last backward: its units' gradients of the step are complete after it.
  std::vector<bool> last_of_chunk(actions_.size(), false);
  {
    std::vector<bool> seen(static_cast<std::size_t>(chunks), false);
    for (std::size_t k = actions_.size(); k-- > 0;) {
      const pipeline::Action& a = actions_[k];
      if (a.pass != pipeline::Pass::backward || seen[static_cast<std::size_t>(a.chunk)]) continue;
      seen[static_cast<std::size_t>(a.chunk)] = true;
      last_of_chunk[k] = true;
    }
  }
  // Receives posted ahead (pipeline::executor_execution, which simulate() shows deadlock-free).
  const int ahead = pipeline::executor_execution(chunks).receives_ahead;

  // A saved state per (chunk, micro-batch) in flight.
  std::vector<std::shared_ptr<nn::SavedState>> saved(
      static_cast<std::size_t>(micro_batches_) * static_cast<std::size_t>(chunks));
  // With several chunks a micro-batch's later chunks run after other micro-batches' forwards:
  // its batch is kept (a copy) from its chunk 0 forward to its last chunk's.
  std::vector<nn::Batch> kept(chunks > 1 ? static_cast<std::size_t>(micro_batches_) : 0);
  std::vector<Work> sends;
  int in_flight = 0;
  peak_in_flight_ = 0;
  losses_.forget();
  try {
    for (std::size_t k = 0; k < actions_.size(); ++k) {
      const pipeline::Action& a = actions_[k];
      post(k);
      for (std::size_t j = k + 1, n = 0; j < actions_.size() && n < static_cast<std::size_t>(ahead); ++j)
        if (actions_[j].recv) {
          post(j);
          ++n;
        }
      // The previous action's send completes before this one computes (pipeline::Execution with
      // send_window 1, deadlock-free for 1F1B): at most one output waits for its receiver.
      for (const Work& w : sends) wait(w);
      sends.clear();
      auto& slot = saved[static_cast<std::size_t>(a.micro) * static_cast<std::size_t>(chunks) +
                         static_cast<std::size_t>(a.chunk)];
      if (a.pass == pipeline::Pass::forward) {
        nn::Batch* in = &batch;
        if (chunks > 1) {
          auto& mine = kept[static_cast<std::size_t>(a.micro)];
          if (a.chunk == 0) {
            next(batch);
            mine = batch.clone();
          }
          in = &mine;
        } else {
          next(batch);
        }
        Tensor input = a.recv ? take(k) : Tensor();
        slot = std::make_shared<nn::SavedState>();
        ctx.saved = slot;
        peak_in_flight_ = std::max(peak_in_flight_, ++in_flight);
        nn::StageOutput out;
        compute(false, [&] { out = stage.forward_chunk(ctx, *in, input, a.chunk); });
        input = {};
        if (chunks > 1 && a.chunk == chunks - 1) kept[static_cast<std::size_t>(a.micro)] = {};
        if (stage.chunk_is_last(a.chunk)) losses_.add(out.loss);  // read once, at the end
        if (a.send)
          sends.push_back(pp.send(out.activation, after, activation_tag(a.micro, virt(a.chunk), V)));
      } else {
        Tensor grad = a.recv ? take(k) : Tensor();
        ctx.saved = slot;
        hooks_.set_sync(last_of_chunk[k]);
        Tensor grad_in;
        compute(true, [&] {
          grad_in = stage.backward_chunk(ctx, grad, scale, a.chunk);
          hooks_.end_backward();
        });
        grad = {};
        STRATA_CHECK(slot->empty(), "pipeline",
                     "stage {}: {} saved tensors of micro-batch {} were not used by its backward",
                     me, slot->size(), a.micro);
        slot.reset();
        --in_flight;
        if (a.send)
          sends.push_back(pp.send(grad_in, before, gradient_tag(a.micro, virt(a.chunk) - 1, V)));
      }
    }
    for (const Work& w : sends) wait(w);
  } catch (...) {
    ctx.saved = outside;
    throw;
  }
  ctx.saved = outside;
  losses_.begin_read();
}

double PipelineExecutor::losses() { return losses_.total(); }

void PipelineExecutor::reduce_tied_grads() {
  const Group& tied = setup_.tied;
  if (tied.size() == 1) return;
  const bool full = hooks_.stage() == 0;
  std::vector<Work> works;
  std::vector<Tensor> grads;
  for (const nn::TiedUnit& t : setup_.stage->tied_units()) {
    const auto u = static_cast<std::size_t>(t.unit);
    grads.push_back(full ? store_.grads(u) : store_.grad_shard(u));
    works.push_back(tied.all_reduce(grads.back(), ReduceOp::sum));
  }
  // Read by the optimizer step's kernels (its norm and overflow check through them).
  for (std::size_t i = 0; i < works.size(); ++i) wait_on(works[i], grads[i]);
}

double PipelineExecutor::from_last_stage(double v) const {
  const Group& pp = setup_.pp;
  if (pp.size() == 1) return v;
  auto buf = std::make_shared<double>(v);
  const Work w = pp.broadcast(span(buf.get(), 1), pp.size() - 1);
  w.keep_alive(buf);
  w.wait();
  return *buf;
}

double PipelineExecutor::eval_loss(const nn::Batch& batch, nn::Context ctx) {
  nn::ModelStage& stage = *setup_.stage;
  const Group& pp = setup_.pp;
  const int me = stage.index(), P = stage.count();
  ctx.grad_enabled = false;
  double loss = 0;
  for (int c = 0; c < stage.chunks(); ++c) {  // virtual stages c * pp + me, in order
    Tensor input;
    if (!stage.chunk_is_first(c)) {
      input = ctx.act(stage.input_shape(batch));
      wait(pp.recv(input, (me + P - 1) % P, kEvalTag));
    }
    const nn::StageOutput out = stage.forward_chunk(ctx, batch, input, c);
    if (!stage.chunk_is_last(c)) wait(pp.send(out.activation, (me + 1) % P, kEvalTag));
    if (stage.chunk_is_last(c)) loss = out.loss.value();
  }
  return from_last_stage(loss);
}

}  // namespace strata::parallel
