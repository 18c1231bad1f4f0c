#include "parallel/engine/dp_engine.hpp"

namespace strata::parallel {

DataParallelEngine::DataParallelEngine(Group dp, nn::Gpt& model, nn::ParamStore& store,
                                       train::Trainer& trainer, const EngineOptions& opts,
                                       nn::Context ctx)
    : dp_(std::move(dp)),
      model_(model),
      trainer_(trainer),
      opts_(opts),
      hooks_(store, dp_, opts.zero),
      ctx_(ctx),
      in_(static_cast<std::size_t>(opts.micro_batch) * opts.seq_len),
      tgt_(in_.size()) {
  STRATA_CHECK(opts.micro_batch >= 1 && opts.accumulation >= 1 && opts.seq_len >= 1, "engine",
               "micro batch {}, accumulation {}, sequence length {} must all be >= 1",
               opts.micro_batch, opts.accumulation, opts.seq_len);
  ctx_.hooks = &hooks_;
}

train::ShardReductions dp_reductions(const Group& dp) {
  train::ShardReductions r;
  r.sum = [dp](double v) {
    dp.all_reduce(span(&v, 1), span(&v, 1), ReduceOp::sum).wait();
    return v;
  };
  r.sum_vector = [dp](std::span<double> v) {
    if (!v.empty()) dp.all_reduce(span(v.data(), v.size()), span(v.data(), v.size()), ReduceOp::sum).wait();
  };
  r.any = [dp](bool b) {
    std::int32_t x = b ? 1 : 0;
    dp.all_reduce(span(&x, 1), span(&x, 1), ReduceOp::max).wait();
    return x != 0;
  };
  return r;
}

nn::Context DataParallelEngine::eval_context() const {
  nn::Context c = ctx_;
  c.grad_enabled = false;
  return c;
}

EngineStep DataParallelEngine::train_step(const NextBatch& next_batch) {
  EngineStep out;
  double sum = 0;
  for (int m = 0; m < opts_.accumulation; ++m) {
    hooks_.set_sync(m == opts_.accumulation - 1);
    next_batch(in_.data(), tgt_.data());
    sum += model_.forward(ctx_, in_.data(), tgt_.data(), opts_.micro_batch, opts_.seq_len);
    model_.backward(ctx_, trainer_.loss_scale() / static_cast<float>(opts_.accumulation));
    hooks_.end_backward();
  }
  hooks_.finish_gradients();
  out.result = trainer_.step();
  hooks_.after_step();
  out.local_loss = sum / opts_.accumulation;
  out.loss = mean_over_dp(out.local_loss);
  return out;
}

double DataParallelEngine::mean_over_dp(double v) const {
  if (dp_.size() == 1) return v;
  Tensor t = Tensor::empty({1}, DType::f64, TensorOptions{}.with(Tier::host).with(Category::comm));
  t.data<double>()[0] = v;
  dp_.all_reduce(t, ReduceOp::avg).wait();
  return t.data<double>()[0];
}

double DataParallelEngine::max_over_dp(double v) const {
  if (dp_.size() == 1) return v;
  Tensor t = Tensor::empty({1}, DType::f64, TensorOptions{}.with(Tier::host).with(Category::comm));
  t.data<double>()[0] = v;
  dp_.all_reduce(t, ReduceOp::max).wait();
  return t.data<double>()[0];
}

}  // namespace strata::parallel
