#include "framework/nn/param_store.hpp"

#include <algorithm>
#include <vector>

#include "framework/core/convert.hpp"

namespace strata::nn {

namespace {

// Points each parameter's view (value or grad) into the full flat buffer.
void point_views(const UnitLayout& l, const Tensor& full, bool grads) {
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    Parameter* p = l.params[i];
    const std::int64_t n = p->shape.numel();
    Tensor v = full.defined() ? full.slice(0, l.offsets[i], l.offsets[i] + n).view(p->shape) : Tensor();
    (grads ? p->grad : p->value) = v;
  }
}

}  // namespace

ParamStore::ParamStore(std::vector<std::vector<Parameter*>> units, const ParamStoreOptions& opts)
    : opts_(opts) {
  STRATA_CHECK(opts.pad_multiple >= 1 && opts.shard_count >= 1 && opts.shard_index >= 0 &&
                   opts.shard_index < opts.shard_count,
               "nn", "bad partition: pad_multiple {}, shard {} of {}", opts.pad_multiple,
               opts.shard_index, opts.shard_count);
  // Pad to a common multiple of pad_multiple and shard_count.
  std::int64_t mult = opts.pad_multiple;
  while (mult % opts.shard_count != 0) mult += opts.pad_multiple;
  const TensorOptions pmem = opts.memory.with(Category::params);
  const TensorOptions gmem = opts.memory.with(Category::grads);
  for (auto& unit : units) {
    UnitLayout l;
    l.params = unit;
    for (auto* p : unit) {
      l.offsets.push_back(l.numel);
      l.numel += p->shape.numel();
    }
    l.padded = (l.numel + mult - 1) / mult * mult;
    std::tie(l.lo, l.hi) = shard_range(l.padded, opts.shard_count, opts.shard_index);
    Tensor v, g, vs, gs;
    if (opts.shard_values && opts.value_store)
      opts.value_store->create(layouts_.size(), l.hi - l.lo, opts.param_dtype);
    else if (opts.shard_values) vs = Tensor::zeros(Shape{l.hi - l.lo}, opts.param_dtype, pmem);
    else v = Tensor::zeros(Shape{l.padded}, opts.param_dtype, pmem);
    if (opts.grad_store)
      opts.grad_store->create(layouts_.size(), opts.shard_grads ? l.hi - l.lo : l.padded,
                              opts.grad_dtype);
    else if (opts.shard_grads) gs = Tensor::zeros(Shape{l.hi - l.lo}, opts.grad_dtype, gmem);
    else g = Tensor::zeros(Shape{l.padded}, opts.grad_dtype, gmem);
    point_views(l, v, false);
    point_views(l, g, true);
    layouts_.push_back(std::move(l));
    values_.push_back(std::move(v));
    grads_.push_back(std::move(g));
    value_shards_.push_back(std::move(vs));
    grad_shards_.push_back(std::move(gs));
  }
}

Tensor ParamStore::value_shard(std::size_t u) const {
  STRATA_CHECK(!opts_.value_store, "nn", "unit {}: parameter slices are offloaded; use "
               "acquire_value_shard / release_value_shard", u);
  if (opts_.shard_values) return value_shards_[u];
  return values_[u].slice(0, layouts_[u].lo, layouts_[u].hi);
}

Tensor ParamStore::acquire_value_shard(std::size_t u) const {
  return opts_.value_store ? opts_.value_store->acquire(u) : value_shard(u);
}

Tensor ParamStore::acquire_value_shard_to_overwrite(std::size_t u) const {
  return opts_.value_store ? opts_.value_store->acquire_to_overwrite(u) : value_shard(u);
}

void ParamStore::release_value_shard(std::size_t u, bool dirty) const {
  if (opts_.value_store) opts_.value_store->release(u, dirty);
}

void ParamStore::expect_value_shards(std::vector<std::size_t> order) const {
  if (opts_.value_store) opts_.value_store->expect(std::move(order));
}

void ParamStore::expect_value_shards_in_order(bool to_overwrite) const {
  if (!opts_.value_store) return;
  std::vector<std::size_t> all(layouts_.size());
  for (std::size_t u = 0; u < all.size(); ++u) all[u] = u;
  if (to_overwrite) opts_.value_store->expect_overwrites(std::move(all));
  else opts_.value_store->expect(std::move(all));
}

Tensor ParamStore::grad_shard(std::size_t u) const {
  STRATA_CHECK(!opts_.grad_store, "nn", "unit {}: gradients are offloaded; use "
               "acquire_grad_shard / release_grad_shard", u);
  if (opts_.shard_grads) return grad_shards_[u];
  return grads_[u].slice(0, layouts_[u].lo, layouts_[u].hi);
}

Tensor ParamStore::acquire_grad_shard(std::size_t u) const {
  if (!opts_.grad_store) return grad_shard(u);
  Tensor t = opts_.grad_store->acquire(u);
  // Without shard_grads the store holds the whole unit: its owned part.
  return opts_.shard_grads ? t : t.slice(0, layouts_[u].lo, layouts_[u].hi);
}

Tensor ParamStore::acquire_grad_shard_to_overwrite(std::size_t u) const {
  if (!opts_.grad_store || !opts_.shard_grads) return acquire_grad_shard(u);
  return opts_.grad_store->acquire_to_overwrite(u);
}

bool ParamStore::grad_shard_is_zero(std::size_t u) const {
  return opts_.grad_store != nullptr && opts_.grad_store->is_zero(u);
}

void ParamStore::release_grad_shard(std::size_t u, bool dirty) const {
  if (opts_.grad_store) opts_.grad_store->release(u, dirty);
}

void ParamStore::expect_grad_shards_in_order() const {
  if (!opts_.grad_store) return;
  std::vector<std::size_t> all(layouts_.size());
  for (std::size_t u = 0; u < all.size(); ++u) all[u] = u;
  opts_.grad_store->expect(std::move(all));
}

void ParamStore::bind_values(std::size_t u, const Tensor& full) {
  STRATA_CHECK(full.numel() == layouts_[u].padded && full.dtype() == opts_.param_dtype, "nn",
               "unit {}: bound values {} {} do not match the padded size {}", u,
               dtype_name(full.dtype()), full.shape().str(), layouts_[u].padded);
  values_[u] = full;
  point_views(layouts_[u], full, false);
}

void ParamStore::unbind_values(std::size_t u) {
  STRATA_CHECK(opts_.shard_values, "nn", "unit {}: values are not sharded, cannot unbind", u);
  values_[u] = {};
  point_views(layouts_[u], Tensor(), false);
}

void ParamStore::bind_grads(std::size_t u, const Tensor& full) {
  STRATA_CHECK(full.numel() == layouts_[u].padded && full.dtype() == opts_.grad_dtype, "nn",
               "unit {}: bound gradients {} {} do not match the padded size {}", u,
               dtype_name(full.dtype()), full.shape().str(), layouts_[u].padded);
  grads_[u] = full;
  point_views(layouts_[u], full, true);
}

void ParamStore::unbind_grads(std::size_t u) {
  STRATA_CHECK(grads_transient(), "nn", "unit {}: gradients are neither sharded nor offloaded, "
               "cannot unbind", u);
  grads_[u] = {};
  point_views(layouts_[u], Tensor(), true);
}

void ParamStore::initialize(std::uint64_t seed) {
  std::vector<float> tmp;
  if (opts_.shard_values) expect_value_shards_in_order();
  for (std::size_t u = 0; u < layouts_.size(); ++u) {
    const UnitLayout& l = layouts_[u];
    // Stored range: the whole unit, or only the owned slice.
    const std::int64_t lo = opts_.shard_values ? l.lo : 0;
    const std::int64_t hi = opts_.shard_values ? l.hi : l.padded;
    const Tensor stored = opts_.shard_values ? acquire_value_shard(u) : values_[u];
    // Values on a GPU are drawn into host memory and copied there once per unit: a host-tier
    // workspace of the unit's stored values (the largest unit's is the host tier's whole-run peak
    // of a job that offloads nothing). So is a plan for a GPU job (the meta device, host_staging)
    // and a test running a GPU job's paths on the CPU (host_staging), so their host tier counts it.
    const bool gpu = stored.device().is_cuda() || opts_.host_staging;
    Tensor dst = gpu ? Tensor::zeros(stored.shape(), stored.dtype(),
                                     TensorOptions{stored.device().is_meta() ? Device::meta()
                                                                            : Device::cpu(),
                                                   Tier::host, Category::workspace,
                                                   stored.storage()->ledger()})
                     : stored;
    // A plan (meta device) has sizes but no values to write.
    for (std::size_t i = 0; i < l.params.size() && !dst.device().is_meta(); ++i) {
      const std::int64_t a = std::max(lo, l.offsets[i]);
      const std::int64_t b = std::min(hi, l.offsets[i] + l.params[i]->shape.numel());
      if (a >= b) continue;
      const auto n = static_cast<std::size_t>(b - a);
      tmp.resize(n);
      init_values(*l.params[i], seed, static_cast<std::uint64_t>(a - l.offsets[i]), tmp.data(), n);
      convert(tmp.data(), DType::f32,
              static_cast<char*>(dst.raw()) + (a - lo) * static_cast<std::int64_t>(dtype_size(dst.dtype())),
              dst.dtype(), n);
    }
    if (gpu) Tensor(stored).copy_from(dst);
    if (opts_.shard_values) release_value_shard(u, true);
  }
}

void ParamStore::zero_grads() {
  for (std::size_t u = 0; u < layouts_.size(); ++u) {
    if (opts_.grad_store) opts_.grad_store->zero(u);
    else if (opts_.shard_grads) grad_shards_[u].zero();
    if (grads_[u].defined()) grads_[u].zero();
  }
}

std::int64_t ParamStore::total_numel() const {
  std::int64_t n = 0;
  for (auto& l : layouts_) n += l.numel;
  return n;
}

std::vector<Parameter*> ParamStore::parameters() const {
  std::vector<Parameter*> out;
  for (auto& l : layouts_) out.insert(out.end(), l.params.begin(), l.params.end());
  return out;
}

Parameter* ParamStore::find(const std::string& name) const {
  for (auto& l : layouts_)
    for (auto* p : l.params)
      if (p->name == name) return p;
  return nullptr;
}

}  // namespace strata::nn
