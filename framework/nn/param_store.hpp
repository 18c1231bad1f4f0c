// ParamStore: materialises declared parameters as views into one flat buffer per unit (one for
// values, one for gradients), padded to a multiple of the shard count so the buffer splits
// evenly. Shard i of n owns elements [i*padded/n, (i+1)*padded/n) of every unit — the one
// partition rule that ZeRO stages and checkpoints share. With shard_values (ZeRO-3) or
// shard_grads (ZeRO-2) only the owned slice is stored; the engine binds full, transient buffers
// around each use. Initialisation is a pure function of (seed, name, element index).
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
  void release_value_shard(std::size_t u, bool dirty) const;
  // Tells an offloaded value store which units the next acquires ask for, in order (no-op
  // without one); in_order: 0..n-1, as the optimizer, initialisation and checkpoints go.
  void expect_value_shards(std::vector<std::size_t> order) const;
  void expect_value_shards_in_order() const;
  Tensor grad_shard(std::size_t u) const;

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

// Unit u's owned value slice for a scope: acquire_value_shard on construction,
// release_value_shard(u, dirty) on destruction (errors of an offloaded write-back surface at
// the store's next use, never from a destructor).
class ValueShardScope {
 public:
  ValueShardScope(const ParamStore& s, std::size_t u, bool dirty)
      : store_(s), u_(u), dirty_(dirty), t_(s.acquire_value_shard(u)) {}
  ~ValueShardScope() {
    try {
      store_.release_value_shard(u_, dirty_);
    } catch (...) {
    }
  }
  ValueShardScope(const ValueShardScope&) = delete;
  ValueShardScope& operator=(const ValueShardScope&) = delete;
  const Tensor& get() const { return t_; }

 private:
  const ParamStore& store_;
  std::size_t u_;
  bool dirty_;
  Tensor t_;
};

// The owned range [lo, hi) of shard `index` of `count` in a buffer of `padded` elements.
inline std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t padded, int count, int index) {
  const std::int64_t per = padded / count;
  return {per * index, per * (index + 1)};
}

}  // namespace strata::nn
