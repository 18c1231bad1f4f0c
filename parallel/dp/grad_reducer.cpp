#include "parallel/dp/grad_reducer.hpp"

#include <algorithm>

namespace strata::parallel {

GradReducer::GradReducer(nn::ParamStore& store, Group dp, const ReducerOptions& opts)
    : store_(store), dp_(std::move(dp)), opts_(opts), done_(store.num_units(), false) {
  STRATA_CHECK(opts.bucket_elements > 0, "dp", "reduce_bucket_size must be > 0, got {}",
               opts.bucket_elements);
}

void GradReducer::launch_unit(std::size_t u) {
  if (done_[u]) return;
  done_[u] = true;
  if (dp_.size() == 1) return;
  const Tensor& g = store_.grads(u);
  const std::int64_t n = store_.layout(u).numel;  // padding is never communicated
  for (std::int64_t lo = 0; lo < n; lo += opts_.bucket_elements) {
    const std::int64_t hi = std::min(n, lo + opts_.bucket_elements);
    inflight_.push_back(dp_.all_reduce(g.slice(0, lo, hi), ReduceOp::avg));
    ++launched_;
    bytes_ += static_cast<std::uint64_t>(hi - lo) * dtype_size(g.dtype());
  }
}

void GradReducer::after_backward(int unit) {
  if (sync_ && opts_.overlap) launch_unit(static_cast<std::size_t>(unit));
}

void GradReducer::finish() {
  // Units in a fixed order, so every rank issues the same sequence of collectives.
  for (std::size_t u = 0; u < store_.num_units(); ++u) launch_unit(u);
  for (auto& w : inflight_) w.wait();
  inflight_.clear();
  std::fill(done_.begin(), done_.end(), false);
}

}  // namespace strata::parallel
