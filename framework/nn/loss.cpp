#include "framework/nn/loss.hpp"

#include <algorithm>
#include <utility>

#include "framework/backend/stream.hpp"
#include "framework/core/error.hpp"

namespace strata::nn {

Loss::Loss(Tensor sum, double divisor) : sum_(std::move(sum)), divisor_(divisor) {
  STRATA_CHECK(sum_.defined() && sum_.dtype() == DType::f64 && sum_.numel() == 1 &&
                   sum_.is_contiguous(),
               "nn", "a loss's sum must be one contiguous f64 element, not {} {}",
               sum_.defined() ? dtype_name(sum_.dtype()) : "undefined",
               sum_.defined() ? sum_.shape().str() : "");
}

double Loss::value() const {
  if (on_host()) return value_;
  return mean(sum_.device().is_meta() ? 0.0 : sum_.item(), divisor_);  // a plan has no values
}

void LossSums::add(const Loss& loss) {
  if (loss.on_host()) {
    entries_.push_back(Entry{loss.value(), 0, -1, 0});
    return;
  }
  const Tensor& sum = loss.sum();
  std::size_t b = 0;
  while (b < bufs_.size() && !(bufs_[b].device() == sum.device() && bufs_[b].tier() == sum.tier()))
    ++b;
  if (b == bufs_.size()) {
    bufs_.emplace_back();
    used_.push_back(0);
  }
  Tensor& buf = bufs_[b];
  std::int64_t& used = used_[b];
  const Stream stream = current_stream(sum.device());
  if (!buf.defined() || used == buf.numel()) {
    // Twice the slots, the ones used so far carried over (queued, as the sums' copies are).
    const TensorOptions o{sum.device(), sum.tier(), Category::other,
                          sum.storage() ? sum.storage()->ledger() : nullptr};
    Tensor grown = Tensor::empty(Shape{std::max<std::int64_t>(8, 2 * used)}, DType::f64, o);
    if (used > 0) copy_async(grown.slice(0, 0, used), buf.slice(0, 0, used), stream);
    buf = std::move(grown);
  }
  copy_async(buf.slice(0, used, used + 1), sum.view(Shape{1}), stream);
  entries_.push_back(Entry{0, loss.divisor(), static_cast<int>(b), used++});
}

double LossSums::total() {
  std::vector<std::vector<double>> values(bufs_.size());
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    if (used_[b] == 0) continue;
    ++reads_;
    const Tensor& buf = bufs_[b];
    values[b].assign(static_cast<std::size_t>(used_[b]), 0.0);
    if (buf.device().is_meta()) continue;  // a plan's step: no values
    const Tensor used = buf.slice(0, 0, used_[b]);
    const Tensor host =
        buf.device().is_cpu() ? used : used.to(DType::f64, TensorOptions{}.with(Tier::host));
    std::copy_n(host.data<double>(), used_[b], values[b].begin());
  }
  double total = 0;
  for (const Entry& e : entries_)
    total += e.buf < 0 ? e.value
                       : Loss::mean(values[static_cast<std::size_t>(e.buf)]
                                          [static_cast<std::size_t>(e.slot)],
                                    e.divisor);
  forget();
  return total;
}

void LossSums::forget() {
  entries_.clear();
  std::fill(used_.begin(), used_.end(), 0);
}

}  // namespace strata::nn
