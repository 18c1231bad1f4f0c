#include "parallel/zero/zero_hooks.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "framework/backend/stream.hpp"

namespace strata::parallel {

double CommVolume::ring_bytes_sent(int n) const {
  const double f = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  return f * (2.0 * static_cast<double>(all_reduce) + static_cast<double>(reduce_scatter) +
              static_cast<double>(all_gather));
}

nn::ParamStoreOptions ZeroHooks::store_options(nn::ParamStoreOptions o, int stage, const Group& dp) {
  if (stage < 0 || stage > 3)
    user_fail("zero", "zero_optimization.stage {} is not a ZeRO stage (0, 1, 2 or 3)", stage);
  o.shard_count = stage == 0 ? 1 : dp.size();
  o.shard_index = stage == 0 ? 0 : dp.rank();
  o.pad_multiple = std::max(o.pad_multiple, dp.size());  // every dp size works, padding tracked
  o.shard_grads = stage >= 2;
  o.shard_values = stage >= 3;
  return o;
}

namespace {
// Forward 0..n-1, backward n-1..0: the order a model without a declared schedule is assumed to use.
std::vector<nn::UnitUse> sequential_schedule(std::size_t n) {
  std::vector<nn::UnitUse> s;
  for (std::size_t u = 0; u < n; ++u) s.push_back({false, static_cast<int>(u)});
  for (std::size_t u = n; u-- > 0;) s.push_back({true, static_cast<int>(u)});
  return s;
}
}  // namespace

ZeroHooks::ZeroHooks(nn::ParamStore& store, Group dp, const ZeroOptions& opts,
                     std::vector<nn::UnitUse> schedule)
    : store_(store), dp_(std::move(dp)), opts_(opts), reduced_(store.num_units(), false),
      stashed_(store.num_units(), false),
      gathered_(store.num_units()),
      schedule_(schedule.empty() ? sequential_schedule(store.num_units()) : std::move(schedule)),
      pos_(schedule_.size() - 1) {
  for (const auto& use : schedule_)
    STRATA_CHECK(use.unit >= 0 && static_cast<std::size_t>(use.unit) < store.num_units(), "zero",
                 "the model's unit schedule names unit {} of {}", use.unit, store.num_units());
  STRATA_CHECK(opts.bucket_elements > 0, "zero", "reduce_bucket_size must be > 0, got {}",
               opts.bucket_elements);
  STRATA_CHECK(std::isfinite(opts.predivide) && opts.predivide > 0, "zero",
               "gradient_predivide_factor must be finite and > 0, got {}", opts.predivide);
  const double n = dp_.size();
  if (opts.prescale) {
    grad_op_ = ReduceOp::sum;
    pre_scale_ = static_cast<float>(1.0 / n);
  } else if (opts.predivide != 1.0) {
    grad_op_ = ReduceOp::sum;
    pre_scale_ = static_cast<float>(1.0 / opts.predivide);
    if (opts.predivide != n) post_scale_ = static_cast<float>(opts.predivide / n);
  }
  const auto& so = store.options();
  const int want_count = opts.stage == 0 ? 1 : dp_.size();
  STRATA_CHECK(so.shard_count == want_count && so.shard_grads == (opts.stage >= 2) &&
                   so.shard_values == (opts.stage >= 3),
               "zero", "the parameter store was not built for ZeRO stage {} on {} ranks "
               "(use ZeroHooks::store_options)", opts.stage, dp_.size());
  STRATA_CHECK(!store.grads_offloaded() || opts.stage >= 1, "zero",
               "gradient offload needs ZeRO stage >= 1 (stage is {})", opts.stage);
  // On a GPU the results of gathers and reductions are read by kernels queued after them on the
  // device's current stream (and by the host only through copies ordered there): those streams
  // wait for them on the device. Slices in a host or NVMe store are read by the host: it waits.
  device_waits_ = so.memory.device.is_cuda() && !so.value_store && !store.grads_offloaded();
  // Offload from a GPU: the stores' host memory is reached by copies on streams of their own.
  staged_grads_ = so.host_staging && store.grads_offloaded();
  staged_values_ = so.host_staging && so.value_store != nullptr;
  if (staged_grads_ || staged_values_) {
    down_ = CopyStream(so.memory.device);
    up_ = CopyStream(so.memory.device);
  }
}

ZeroHooks::~ZeroHooks() {
  // Never leave a collective referring to freed buffers: wait, but do not throw from here.
  for (auto& w : allreduce_inflight_) try { w.wait(); } catch (...) {}
  for (auto& p : pending_) try { p.work.wait(); } catch (...) {}
  for (auto& w : device_waited_) try { w.wait(); } catch (...) {}
  land(/*quiet=*/true);
  for (std::size_t u = 0; u < gathered_.size(); ++u) try { finish_gather(gathered_[u], u, false); } catch (...) {}
}

bool ZeroHooks::persistent(std::size_t u) const {
  return store_.layout(u).padded <= opts_.persistence_threshold;
}

// ---- stage 3: gathering parameters ----

void ZeroHooks::finish_gather(Gathered& g, std::size_t u, bool on_device) {
  // The slice goes back to its store whether or not the gather succeeded — once no upload of it
  // is running (its buffer may be reused for another unit's slice at once).
  struct Release {
    ZeroHooks* self;
    Gathered& g;
    std::size_t u;
    ~Release() {
      if (!g.shard.defined()) return;
      try {
        g.lifted.synchronize();
      } catch (...) {
      }
      g.lifted = Event();
      g.shard = Tensor();
      self->store_.release_value_shard(u, false);
    }
  } release{this, g, u};
  if (on_device) wait_on_stream(g.work);
  else wait(g.work);
  if (g.up.defined()) {
    // The gather was posted on the copy stream (after the upload): the compute stream waits for
    // that point (a one-rank gather is a copy queued there), or, when the unit is not used next
    // (an error, the step's end), the host does, before the slice's device copy is freed.
    if (on_device) g.posted.wait(current_stream(store_.options().memory.device));
    else g.posted.synchronize();
    g.posted = Event();
    g.up = Tensor();
  }
}

void ZeroHooks::wait(Work& w) {
  const auto t0 = std::chrono::steady_clock::now();
  w.wait();
  comm_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ZeroHooks::wait_on_stream(Work& w) {
  if (!device_waits_) return wait(w);
  const auto t0 = std::chrono::steady_clock::now();
  w.wait_on(current_stream(store_.options().memory.device));
  comm_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  device_waited_.push_back(w);
}

void ZeroHooks::confirm_device_waits() {
  for (auto& w : device_waited_) wait(w);
  device_waited_.clear();
}

void ZeroHooks::start_gather(std::size_t u) {
  Gathered& g = gathered_[u];
  const auto& l = store_.layout(u);
  // The slice first: if reading it fails (NVMe), nothing of this gather is left half-set; if
  // what follows fails, the slice goes back.
  Tensor shard = store_.acquire_value_shard(u);
  try {
    const TensorOptions pm = store_.options().memory.with(Category::params);
    Tensor full = Tensor::empty(Shape{l.padded}, store_.options().param_dtype, pm);
    if (staged_values_) {
      // A host slice: it goes up on the copy stream, and the gather is posted there after it (a
      // transport orders its call after the posting thread's current stream), so both run beside
      // the compute queued before; finish_gather orders the unit's use after them.
      Tensor up = Tensor::empty(shard.shape(), shard.dtype(), pm);
      g.lifted = up_.copy(up, shard);
      {
        const StreamGuard on(up_.stream());
        g.work = dp_.all_gather(up, full);
      }
      g.posted = up_.mark();
      g.up = std::move(up);
    } else {
      g.work = dp_.all_gather(shard, full);
    }
    g.full = std::move(full);
  } catch (...) {
    try {
      g.lifted.synchronize();  // an upload may still read the slice
      g.posted.synchronize();
    } catch (...) {
    }
    g.lifted = g.posted = Event();
    g.up = Tensor();
    store_.release_value_shard(u, false);
    throw;
  }
  g.shard = std::move(shard);
  g.ready = false;
  live_elements_ += l.padded;
  volume_.all_gather += g.full.nbytes();
}

void ZeroHooks::acquire(std::size_t u) {
  Gathered& g = gathered_[u];
  if (!g.full.defined()) start_gather(u);
  if (!g.ready) {
    finish_gather(g, u, true);
    g.ready = true;
    store_.bind_values(u, g.full);
  }
  ++g.uses;
}

void ZeroHooks::release(std::size_t u) {
  Gathered& g = gathered_[u];
  if (g.uses > 0) --g.uses;
  if (g.uses > 0 || persistent(u) || reused_soon(u)) return;
  finish_gather(g, u, true);
  store_.unbind_values(u);
  live_elements_ -= store_.layout(u).padded;
  g = Gathered{};
}

void ZeroHooks::advance(bool backward, int unit) {
  const std::size_t n = schedule_.size();
  for (std::size_t k = 1; k <= n; ++k) {
    const std::size_t i = (pos_ + k) % n;
    if (schedule_[i] == nn::UnitUse{backward, unit}) {
      pos_ = i;
      return;
    }
  }
  fail("zero", "unit {} was used in a {} pass, which the model's unit schedule does not list",
       unit, backward ? "backward" : "forward");
}

bool ZeroHooks::reused_soon(std::size_t u) const {
  if (opts_.max_reuse_distance <= 0) return false;
  std::int64_t between = 0;
  for (std::size_t i = pos_ + 1; i < schedule_.size() && between < opts_.max_reuse_distance; ++i) {
    const auto v = static_cast<std::size_t>(schedule_[i].unit);
    if (v == u) return true;
    between += store_.layout(v).padded;
  }
  return false;
}

void ZeroHooks::expect_gathers() const {
  if (!store_.options().value_store) return;
  std::vector<std::size_t> order;
  for (std::size_t i = pos_ + 1; i < schedule_.size(); ++i) {
    const auto v = static_cast<std::size_t>(schedule_[i].unit);
    if (!gathered_[v].full.defined() && std::find(order.begin(), order.end(), v) == order.end())
      order.push_back(v);
  }
  store_.expect_value_shards(std::move(order));
}

void ZeroHooks::prefetch_next_use() {
  if (pos_ + 1 >= schedule_.size()) return;  // the micro-batch's last use
  const auto u = static_cast<std::size_t>(schedule_[pos_ + 1].unit);
  if (gathered_[u].full.defined()) return;
  const std::int64_t n = store_.layout(u).padded;
  if (n > opts_.prefetch_elements || live_elements_ + n > opts_.max_live_elements) return;
  start_gather(u);
}

// ---- gradient reductions ----

void ZeroHooks::set_reduce_gradients(bool on) {
  STRATA_CHECK(on || opts_.stage == 0, "zero",
               "gradients can be left unreduced at ZeRO stage 0 only (stage is {})", opts_.stage);
  reduce_grads_ = on;
}

void ZeroHooks::launch_unit_reduction(std::size_t u) {
  if (reduced_[u] || !reduce_grads_) return;
  reduced_[u] = true;
  const auto& l = store_.layout(u);
  if (opts_.stage == 0) {
    const Tensor& g = store_.grads(u);
    for (std::int64_t lo = 0; lo < l.numel; lo += opts_.bucket_elements) {
      const std::int64_t hi = std::min(l.numel, lo + opts_.bucket_elements);
      Tensor bucket = g.slice(0, lo, hi);
      scale(bucket, pre_scale_);
      allreduce_inflight_.push_back(dp_.all_reduce(bucket, grad_op_));
      allreduce_buckets_.push_back(bucket);
      volume_.all_reduce += bucket.nbytes();
    }
    return;
  }
  const Tensor full = store_.grads(u);
  STRATA_CHECK(full.defined(), "zero", "unit {} has no gradient buffer to reduce", u);
  scale(full, pre_scale_);
  Tensor out;
  Work w;  // (already complete)
  if (dp_.size() == 1 && store_.grads_transient()) {
    // One rank: the unit's gradient is already the reduced one, and its buffer (dropped after
    // this reduction) serves as the output: no copy, no comm buffer.
    out = full.slice(0, l.lo, l.hi);
  } else {
    out = Tensor::empty(Shape{l.hi - l.lo}, full.dtype(),
                        store_.options().memory.with(Category::comm));
    w = dp_.reduce_scatter(full, out, grad_op_);
  }
  volume_.reduce_scatter += full.nbytes();
  pending_.push_back(PendingReduce{u, full, out, std::move(w)});
  if (store_.grads_transient()) {
    store_.unbind_grads(u);  // the pending entry keeps it alive until done
    // Finish the previous unit's reduce-scatter (it had this unit's backward to complete) so
    // that at most two full gradient buffers exist at once instead of every unit's.
    complete_reductions(1);
  }
}

void ZeroHooks::scale(const Tensor& t, float s) const {
  if (s != 1.0f) ops::scale_inplace(t, s);
}

void ZeroHooks::complete_reductions(std::size_t keep) {
  if (keep == 0) {
    for (auto& w : allreduce_inflight_) wait_on_stream(w);
    allreduce_inflight_.clear();
    for (const Tensor& b : allreduce_buckets_) scale(b, post_scale_);
    allreduce_buckets_.clear();
  }
  if (pending_.size() <= keep) return;
  const auto done = pending_.begin() + static_cast<std::ptrdiff_t>(pending_.size() - keep);
  for (auto it = pending_.begin(); it != done; ++it) {
    PendingReduce& p = *it;
    wait_on_stream(p.work);
    scale(p.out, post_scale_);
    if (staged_grads_) {
      offload_reduced(p);
      continue;
    }
    if (opts_.stage >= 2 && store_.grad_shard_is_zero(p.unit)) {
      // The stored slice holds nothing yet (the step's first micro-batch): the reduced slice is
      // the gradient so far. Updated in backward where it is final, it is never stored; else it
      // is copied in without the store reading or zeroing its slice first.
      if (reduced_gradient_ && sync_ && reduced_gradient_(p.unit, p.out)) continue;
      nn::GradShardScope held(store_, p.unit, /*dirty=*/true, /*overwrite=*/true);
      Tensor shard = held.get();
      shard.copy_from(p.out);
      continue;
    }
    // The owned slice, on the device or in the gradient store (read, updated, written back).
    nn::GradShardScope held(store_, p.unit, /*dirty=*/true);
    Tensor shard = held.get();
    if (opts_.stage == 1) shard.copy_from(p.out);  // the reduced owned slice replaces the local one
    else ops::add_inplace(shard, p.out);           // accumulate micro-batches
    if (reduced_gradient_ && sync_ && reduced_gradient_(p.unit, shard)) held.discard_changes();
  }
  pending_.erase(pending_.begin(), done);
}

void ZeroHooks::stash_unreduced(std::size_t u) {
  nn::ValueShardStore& gs = *store_.options().grad_store;
  Tensor dst = gs.acquire(u);
  try {
    if (staged_grads_) {
      // Down beside the next unit's backward; the unit stays held (and the device buffer alive)
      // until the copy has landed.
      const Tensor& src = store_.grads(u);
      landing_.push_back(Landing{src, down_.copy(dst, src), u, /*whole=*/true, /*dirty=*/true});
    } else {
      dst.copy_from(store_.grads(u));
    }
  } catch (...) {
    gs.release(u, false);
    throw;
  }
  if (!staged_grads_) gs.release(u, true);
  store_.unbind_grads(u);
  stashed_[u] = true;
}

void ZeroHooks::restore_stashed(std::size_t u, Tensor& full) {
  nn::ValueShardStore& gs = *store_.options().grad_store;
  const Tensor src = gs.acquire(u);
  if (staged_grads_) {
    // Up on the copy stream; the unit's backward (queued next) waits for it on the device, and
    // the store's unit is released once the copy has landed.
    Event up;
    try {
      up = up_.copy(full, src);
    } catch (...) {
      gs.release(u, false);
      throw;
    }
    landing_.push_back(Landing{full, up, u, /*whole=*/true, /*dirty=*/false});  // land() releases
    stashed_[u] = false;
    up_.order_before_current();
    return;
  }
  try {
    full.copy_from(src);
  } catch (...) {
    gs.release(u, false);
    throw;
  }
  gs.release(u, false);
  stashed_[u] = false;
}

// ---- offload from a GPU: gradients to the host ----

void ZeroHooks::offload_reduced(PendingReduce& p) {
  const std::size_t u = p.unit;
  Tensor g = p.out;  // on the device
  // ZeRO-1 stores the last micro-batch's reduced slice as it is; stages 2-3 add it to what the
  // earlier micro-batches stored, unless nothing is stored yet.
  const bool stored = opts_.stage >= 2 && !store_.grad_shard_is_zero(u);
  Tensor held;  // the store's slice, held until its copy down has landed (land())
  try {
    if (stored) {
      // Accumulated where the run without offload accumulates, on the device: the stored slice
      // comes up and is added to the reduced one (a + b is b + a, bit for bit), so the gradient
      // norm below and the values stored are exactly that run's.
      held = store_.acquire_grad_shard(u);
      Tensor prev = Tensor::empty(g.shape(), g.dtype(), store_.options().memory.with(Category::grads));
      up_.copy(prev, held);
      up_.order_before_current();
      ops::add_inplace(g, prev);
    }
    // The step's final gradient: its share of the norm is taken on the device, as without
    // offload. (Updates in backward are not offered with staging: Training refuses them.)
    if (reduced_gradient_ && sync_)
      STRATA_CHECK(!reduced_gradient_(u, g), "zero", "unit {}: a gradient offloaded from the "
                   "device cannot be consumed where it is reduced", u);
    if (!held.defined())
      held = opts_.stage >= 2 ? store_.acquire_grad_shard_to_overwrite(u) : store_.acquire_grad_shard(u);
    // Down after the kernels that wrote it (the reduction, the scaling, the addition); backward
    // goes on meanwhile. The host slice is held, and the device slice kept, until it has landed.
    landing_.push_back(Landing{g, down_.copy(held, g), u, /*whole=*/false, /*dirty=*/true});
  } catch (...) {
    // The slice goes back unchanged, once no upload reads it.
    if (held.defined()) {
      try {
        up_.synchronize();
      } catch (...) {
      }
      store_.release_grad_shard(u, false);
    }
    throw;
  }
}

void ZeroHooks::release_landed(const Landing& l, bool dirty) {
  if (l.whole) store_.options().grad_store->release(l.unit, dirty);
  else store_.release_grad_shard(l.unit, dirty);
}

std::exception_ptr ZeroHooks::land(bool quiet) {
  std::exception_ptr first;
  while (!landing_.empty()) {
    const Landing l = std::move(landing_.front());
    landing_.pop_front();
    bool ok = true;
    try {
      l.done.synchronize();
    } catch (...) {
      ok = false;
      if (!first) first = std::current_exception();
    }
    try {
      release_landed(l, ok && !quiet && l.dirty);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first && !quiet) std::rethrow_exception(first);
  return first;
}

// ---- aborting a step ----

void ZeroHooks::abort_step() {
  std::exception_ptr first;
  auto quietly = [&](auto&& f) {
    try {
      f();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  };
  for (auto& w : allreduce_inflight_) quietly([&] { wait(w); });
  allreduce_inflight_.clear();
  for (auto& p : pending_) quietly([&] { wait(p.work); });
  pending_.clear();
  for (auto& w : device_waited_) quietly([&] { wait(w); });
  device_waited_.clear();
  if (std::exception_ptr e = land(/*quiet=*/true); e && !first) first = e;
  for (std::size_t u = 0; u < gathered_.size(); ++u) {
    if (!gathered_[u].full.defined()) continue;
    quietly([&] { finish_gather(gathered_[u], u, false); });
    if (store_.values_bound(u)) store_.unbind_values(u);
    gathered_[u] = Gathered{};
  }
  live_elements_ = 0;
  if (opts_.stage >= 2 || store_.grads_transient())
    for (std::size_t u = 0; u < store_.num_units(); ++u)
      if (store_.grads(u).defined()) store_.unbind_grads(u);
  std::fill(reduced_.begin(), reduced_.end(), false);
  std::fill(stashed_.begin(), stashed_.end(), false);  // zero_grads below empties the store
  pos_ = schedule_.size() - 1;
  sync_ = true;
  store_.zero_grads();
  if (first) std::rethrow_exception(first);
}

// ---- hooks ----

void ZeroHooks::before_forward(int unit) {
  if (opts_.stage < 3) return;
  advance(false, unit);
  expect_gathers();
  acquire(static_cast<std::size_t>(unit));
  prefetch_next_use();
}

void ZeroHooks::after_forward(int unit) {
  if (opts_.stage >= 3) release(static_cast<std::size_t>(unit));
}

void ZeroHooks::before_backward(int unit) {
  const auto u = static_cast<std::size_t>(unit);
  if (opts_.stage >= 3) {
    advance(true, unit);
    expect_gathers();
    acquire(u);
    prefetch_next_use();
  }
  if (store_.grads_transient() && !store_.grads(u).defined()) {
    const auto& l = store_.layout(u);
    const TensorOptions gm = store_.options().memory.with(Category::grads);
    const DType gd = store_.options().grad_dtype;
    Tensor full;
    if (stashed_[u]) {
      full = Tensor::empty(Shape{l.padded}, gd, gm);
      restore_stashed(u, full);  // backward accumulates onto the earlier micro-batches
    } else {
      full = Tensor::zeros(Shape{l.padded}, gd, gm);
    }
    store_.bind_grads(u, full);
  }
}

void ZeroHooks::after_backward(int unit) {
  const auto u = static_cast<std::size_t>(unit);
  // The copies launched since the last hook (the previous unit's gradient going down, this
  // unit's stashed micro-batches coming up) have had a unit's backward to run beside; this one's
  // kernels are queued, so the device stays busy while the host waits for them here.
  land();
  const bool per_micro = opts_.stage >= 2;
  // Offloaded gradients leave the device right after the unit's backward, with or without
  // overlap_comm (without it, the reduction is waited for at once).
  const bool offloaded = store_.grads_offloaded();
  if (offloaded && !per_micro && !sync_) {
    stash_unreduced(u);
  } else if ((opts_.overlap || offloaded) && (per_micro || sync_)) {
    launch_unit_reduction(u);
    if (!opts_.overlap) complete_reductions();
  }
  if (opts_.stage >= 3) release(u);
}

void ZeroHooks::end_backward() {
  if (!store_.grads_transient()) return;
  for (std::size_t u = 0; u < store_.num_units(); ++u)
    if (store_.grads(u).defined()) launch_unit_reduction(u);
  complete_reductions();
  land();  // every gradient in its store: the optimizer reads them there
  confirm_device_waits();
  std::fill(reduced_.begin(), reduced_.end(), false);
}

void ZeroHooks::finish_gradients() {
  if (store_.grads_transient()) return;
  for (std::size_t u = 0; u < store_.num_units(); ++u) launch_unit_reduction(u);
  complete_reductions();
  confirm_device_waits();
  std::fill(reduced_.begin(), reduced_.end(), false);
}

void ZeroHooks::after_step() {
  if (opts_.stage == 1 || opts_.stage == 2) {
    // At most allgather_bucket_elements in flight (each needs a copy of the owned slice to send
    // from: the slice lives inside the output).
    std::vector<Work> works;
    std::vector<Tensor> keep;
    std::int64_t in_flight = 0;
    auto drain = [&] {
      for (auto& w : works) wait_on_stream(w);  // read by the next step's kernels
      works.clear();
      keep.clear();
      in_flight = 0;
    };
    for (std::size_t u = 0; u < store_.num_units(); ++u) {
      const Tensor& full = store_.values(u);
      if (in_flight > 0 && in_flight + full.numel() > opts_.allgather_bucket_elements) drain();
      Tensor mine = store_.value_shard(u).clone(store_.options().memory.with(Category::comm));
      works.push_back(dp_.all_gather(mine, full));
      keep.push_back(std::move(mine));
      in_flight += full.numel();
      volume_.all_gather += full.nbytes();
    }
    drain();
  } else if (opts_.stage == 3) {
    for (std::size_t u = 0; u < gathered_.size(); ++u) {
      if (!gathered_[u].full.defined()) continue;
      gathered_[u].uses = 0;
      finish_gather(gathered_[u], u, true);
      if (store_.values_bound(u)) store_.unbind_values(u);
      live_elements_ -= store_.layout(u).padded;
      gathered_[u] = Gathered{};
    }
    pos_ = schedule_.size() - 1;  // the next step starts the schedule over
  }
  confirm_device_waits();
}

}  // namespace strata::parallel
