#include "framework/nn/loss.hpp"

#include <algorithm>
#include <utility>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/error.hpp"
#include "framework/core/meta_device.hpp"

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

LossSums::~LossSums() {
  try {
    wait_copies();
  } catch (...) {  // a GPU error: nothing more to wait for
  }
}

void LossSums::wait_copies() const {
  if (reading_)
    for (const Event& e : copied_) e.synchronize();
}

void LossSums::add(const Loss& loss) {
  STRATA_CHECK(!reading_, "nn", "a loss added after LossSums::begin_read, before total()");
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
    Tensor grown = Tensor::empty(Shape{std::max<std::int64_t>(kFirstSlots, 2 * used)}, DType::f64, o);
    if (used > 0) copy_async(grown.slice(0, 0, used), buf.slice(0, 0, used), stream);
    buf = std::move(grown);
  }
  copy_async(buf.slice(0, used, used + 1), sum.view(Shape{1}), stream);
  entries_.push_back(Entry{0, loss.divisor(), static_cast<int>(b), used++});
}

void LossSums::begin_read() {
  STRATA_CHECK(!reading_, "nn", "LossSums::begin_read twice before total()");
  reading_ = true;
  host_.resize(bufs_.size());
  copied_.resize(bufs_.size());
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    const Tensor& buf = bufs_[b];
    const bool gpu = buf.device().is_cuda();
    // A GPU job's plan (meta_cuda) is charged the host buffer a GPU's read keeps.
    if (used_[b] == 0 || !(gpu || is_meta_cuda(buf.device()))) continue;
    if (!host_[b].defined() || host_[b].numel() < buf.numel()) {
      const TensorOptions o =
          TensorOptions{gpu ? Device::cpu() : Device::meta(), Tier::host, Category::other,
                        buf.storage() ? buf.storage()->ledger() : nullptr}
              .pinned_if(gpu);
      host_[b] = Tensor::empty(Shape{buf.numel()}, DType::f64, o);
    }
    if (!gpu) continue;
    const Stream stream = current_stream(buf.device());
    copy_async(host_[b].slice(0, 0, used_[b]), buf.slice(0, 0, used_[b]), stream);
    copied_[b].record(stream);
  }
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
    Tensor host;
    if (buf.device().is_cpu()) {
      host = used;
    } else if (reading_) {
      if (!copied_[b].query()) {  // a host wait only if the GPU has not run the copy yet
        cuda::note_host_wait();
        copied_[b].synchronize();
      }
      host = host_[b];
    } else {
      host = used.to(DType::f64, TensorOptions{}.with(Tier::host));
    }
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
  // A read begun and not finished (a step that failed): its copies are waited for before the
  // host buffers can take the next ones.
  wait_copies();
  reading_ = false;
  entries_.clear();
  std::fill(used_.begin(), used_.end(), 0);
}

}  // namespace strata::nn
