#include "framework/train/value_staging.hpp"

#include <algorithm>

namespace strata::train {

std::unique_ptr<ValueStaging> ValueStaging::make(const nn::ParamStore& store, Tier state_tier) {
  const nn::ParamStoreOptions& o = store.options();
  if (!o.host_staging) return nullptr;
  const bool values_on_host = o.value_store != nullptr;  // offload_param's host or NVMe slices
  const bool state_on_host = state_tier == Tier::host;
  if (values_on_host == state_on_host) return nullptr;
  return std::make_unique<ValueStaging>(store, state_on_host);
}

namespace {
std::size_t largest_slice_bytes(const nn::ParamStore& store) {
  std::int64_t n = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u)
    n = std::max(n, store.layout(u).hi - store.layout(u).lo);
  return static_cast<std::size_t>(n) * dtype_size(store.options().param_dtype);
}
}  // namespace

ValueStaging::ValueStaging(const nn::ParamStore& store, bool state_on_host)
    : store_(store), on_host_(state_on_host), copies_(store.options().memory.device) {
  if (on_host_) {
    const TensorOptions& m = store.options().memory;
    TensorOptions host{m.device.is_meta() ? Device::meta() : Device::cpu(), Tier::host,
                       Category::params, m.ledger};
    host.pinned = true;
    // Two: one being updated by the host while the other's copy to the GPU runs.
    host_ = StagingBuffers(2, largest_slice_bytes(store), host);
  }
}

ValueStaging::~ValueStaging() {
  try {
    synchronize();
  } catch (...) {
  }
}

Tensor ValueStaging::stage(const Tensor& slice, bool read) {
  Tensor t = on_host_ ? host_.take(slice.numel(), slice.dtype())
                      : Tensor::empty(slice.shape(), slice.dtype(),
                                      store_.options().memory.with(Category::params));
  if (read) {
    const Event e = copies_.copy(t, slice);
    if (on_host_) e.synchronize();        // the host reads it next
    else copies_.order_before_current();  // the update's kernels read it next
  }
  return t;
}

void ValueStaging::write_back(const Tensor& slice, const Tensor& staged) {
  const Event e = copies_.copy(slice, staged);
  if (on_host_) host_.used_until(e);  // the buffer is taken again only after this copy
  else e.synchronize();               // the store's host slice is released next
}

void ValueStaging::end_step() {
  if (on_host_) copies_.order_before_current();
}

void ValueStaging::synchronize() {
  copies_.synchronize();
  if (on_host_) host_.synchronize();
}

ValueSlice::ValueSlice(const nn::ParamStore& store, ValueStaging* staging, std::size_t u,
                       bool dirty, bool overwrite)
    : held_(store, u, dirty, overwrite), staging_(staging), dirty_(dirty) {
  if (staging_) staged_ = staging_->stage(held_.get(), /*read=*/!overwrite);
}

ValueSlice::~ValueSlice() {
  if (!staging_ || finished_) return;
  // Not finished (a use that only read, or an update that failed): the staged copy is dropped and
  // the store's slice released as it was — once no upload reads it (state on the device).
  held_.discard_changes();
  if (!staging_->state_on_host()) {
    try {
      staging_->synchronize();
    } catch (...) {
    }
  }
}

void ValueSlice::finish() {
  if (finished_) return;
  finished_ = true;
  if (!staging_) return;
  if (dirty_) staging_->write_back(held_.get(), staged_);
  else if (!staging_->state_on_host()) staging_->synchronize();  // the upload read the host slice
}

}  // namespace strata::train
