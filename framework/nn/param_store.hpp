// ParamStore: materialises declared parameters as views into one flat buffer per unit (one for
// values, one for gradients), padded to a multiple of the shard count so the buffer splits
// evenly. Shard i of n owns elements [i*padded/n, (i+1)*padded/n) of every unit — the one
// partition rule that ZeRO stages and checkpoints share. With shard_values (ZeRO-3) or
// shard_grads (ZeRO-2) only the owned slice is stored; the engine binds full, transient buffers
// around each use. With a grad_store (gradient offload) the stored gradients live there instead
// and the device holds gradients only as transient full buffers around each unit's backward.
// Initialisation is a pure function of (seed, name, element index).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/nn/parameter.hpp"
#include "framework/nn/value_shard_store.hpp"

namespace strata::nn {

struct UnitLayout {
  std::vector<Parameter*> params;
  std::vector<std::int64_t> offsets;  // element offset of each parameter in the flat buffer
  std::int64_t numel = 0;             // sum of parameter sizes
  std::int64_t padded = 0;            // numel rounded up to a multiple of pad_multiple
  std::int64_t lo = 0, hi = 0;        // the owned range [lo, hi) of the padded buffer
};

struct ParamStoreOptions {
  DType param_dtype = DType::f32;
  DType grad_dtype = DType::f32;
  int pad_multiple = 1;    // rounded up to a multiple of shard_count
  TensorOptions memory{};  // device/tier/ledger; categories are set per buffer
  int shard_count = 1;
  int shard_index = 0;
  bool shard_values = false;  // store only the owned slice of parameter values
  bool shard_grads = false;   // store only the owned slice of gradients
  // With shard_values: where the owned slices live (offload_param); null: on `memory`.
  std::shared_ptr<ValueShardStore> value_store{};
  // Where the stored gradients live (gradient offload); null: on `memory`. It holds the owned
  // slice of each unit with shard_grads, else the whole padded unit (ZeRO-1 accumulates
  // unreduced gradients until the last micro-batch). Gradients on `memory` are then only the
  // full buffers the engine binds around each unit's backward.
  std::shared_ptr<ValueShardStore> grad_store{};
  // The device tier's memory is not the host's (a GPU, or a plan for one; tests set it on the CPU
  // to run these paths there): what moves between `memory` and the offload stores' host memory
  // (gradients into the grad_store, value slices to the optimizer and to the gathers) goes
  // through copies on a copy stream and pinned staging buffers (framework/backend/transfer.hpp),
  // never through one op reading both. False: the device tier is host memory (the CPU).
  bool host_staging = false;
};

class ParamStore {
 public:
  ParamStore(std::vector<std::vector<Parameter*>> units, const ParamStoreOptions& opts);

  // Writes the initial value of every stored element.
  void initialize(std::uint64_t seed);
  // Zeroes the stored gradients (the owned slices when sharded).
  void zero_grads();

  std::size_t num_units() const { return layouts_.size(); }
  const UnitLayout& layout(std::size_t u) const { return layouts_[u]; }
  const ParamStoreOptions& options() const { return opts_; }

  // The full flat buffers (undefined for a sharded kind unless bound).
  const Tensor& values(std::size_t u) const { return values_[u]; }
  const Tensor& grads(std::size_t u) const { return grads_[u]; }
  // The owned slices [lo, hi) of the unit's values and gradients (views). value_shard throws
  // when the slices are offloaded (options().value_store): use acquire/release_value_shard.
  Tensor value_shard(std::size_t u) const;
  // The owned value slice, resident until release_value_shard(u, dirty) (`dirty`: it was
  // written). Without a value store: value_shard(u), and release does nothing.
  Tensor acquire_value_shard(std::size_t u) const;
  // The same for a caller that writes every element of the slice before releasing it dirty: an
  // offloaded store does not read it (contents unspecified until written).
  Tensor acquire_value_shard_to_overwrite(std::size_t u) const;
  void release_value_shard(std::size_t u, bool dirty) const;
  // Tells an offloaded value store which units the next acquires ask for, in order (no-op
  // without one); in_order: 0..n-1, as the optimizer, initialisation and checkpoints go.
  void expect_value_shards(std::vector<std::size_t> order) const;
  // to_overwrite: the acquires will be acquire_value_shard_to_overwrite (nothing read ahead).
  void expect_value_shards_in_order(bool to_overwrite = false) const;
  // The owned gradient slice (a view). Throws when gradients are offloaded (grad_store): use
  // acquire/release_grad_shard (or GradShardScope).
  Tensor grad_shard(std::size_t u) const;
  // The owned gradient slice, resident until release_grad_shard(u, dirty); without a
  // grad_store: grad_shard(u), and release does nothing.
  Tensor acquire_grad_shard(std::size_t u) const;
  // The same for a caller that writes every element before releasing it dirty: a store on slow
  // media neither reads nor zeroes it (only with shard_grads, where the slice is the whole stored
  // unit; otherwise acquire_grad_shard).
  Tensor acquire_grad_shard_to_overwrite(std::size_t u) const;
  void release_grad_shard(std::size_t u, bool dirty) const;
  // The gradient store knows unit u's slice is all zeros (zero_grads, nothing released dirty
  // since); false without a gradient store.
  bool grad_shard_is_zero(std::size_t u) const;
  void expect_grad_shards_in_order() const;
  // Gradients are offloaded: none are stored on `memory`; full buffers exist only while bound.
  bool grads_offloaded() const { return opts_.grad_store != nullptr; }
  // Whether the stored gradients are only the owned slices (shard_grads) or whole units.
  bool grads_transient() const { return opts_.shard_grads || grads_offloaded(); }

  // Points the unit's parameters at a full flat buffer (size padded) of values / gradients; used
  // for gathered ZeRO-3 parameters and transient ZeRO-2 gradient buffers. unbind_* undoes it
  // (the parameters' value/grad become undefined) and drops the store's reference.
  void bind_values(std::size_t u, const Tensor& full);
  void unbind_values(std::size_t u);
  void bind_grads(std::size_t u, const Tensor& full);
  void unbind_grads(std::size_t u);
  bool values_bound(std::size_t u) const { return values_[u].defined(); }

  std::int64_t total_numel() const;
  std::vector<Parameter*> parameters() const;
  Parameter* find(const std::string& name) const;

 private:
  ParamStoreOptions opts_;
  std::vector<UnitLayout> layouts_;
  std::vector<Tensor> values_, grads_;             // full buffers (bound or owned)
  std::vector<Tensor> value_shards_, grad_shards_;  // owned slices when sharded
};

// Unit u's owned value (Grads = false) or gradient slice for a scope: acquire_*_shard on
// construction, release_*_shard(u, dirty) on destruction (errors of an offloaded write-back
// surface at the store's next use, never from a destructor).
template <bool Grads>
class ShardScope {
 public:
  // overwrite: the caller writes every element (acquire_*_shard_to_overwrite).
  ShardScope(const ParamStore& s, std::size_t u, bool dirty, bool overwrite = false)
      : store_(s), u_(u), dirty_(dirty),
        t_(Grads       ? (overwrite ? s.acquire_grad_shard_to_overwrite(u) : s.acquire_grad_shard(u))
           : overwrite ? s.acquire_value_shard_to_overwrite(u)
                       : s.acquire_value_shard(u)) {}
  ~ShardScope() {
    try {
      if (Grads) store_.release_grad_shard(u_, dirty_);
      else store_.release_value_shard(u_, dirty_);
    } catch (...) {
    }
  }
  ShardScope(const ShardScope&) = delete;
  ShardScope& operator=(const ShardScope&) = delete;
  const Tensor& get() const { return t_; }
  // Released clean after all (the contents were consumed and are not to be kept).
  void discard_changes() { dirty_ = false; }

 private:
  const ParamStore& store_;
  std::size_t u_;
  bool dirty_;
  Tensor t_;
};
using ValueShardScope = ShardScope<false>;
using GradShardScope = ShardScope<true>;

// The owned range [lo, hi) of shard `index` of `count` in a buffer of `padded` elements.
inline std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t padded, int count, int index) {
  const std::int64_t per = padded / count;
  return {per * index, per * (index + 1)};
}

}  // namespace strata::nn
