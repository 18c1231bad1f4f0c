// Optimizer: one optimizer as one object (docs/optimizers.md) — its hyperparameters, the state it
// keeps per unit slice declared as data (StateTensor: name, dtype, shape rule), what it needs from
// the engine and what it refuses (Declaration), and its step over the owned slices. The Trainer,
// ZeRO's partition, the state stores, the checkpointer, the memory formula and the planner read
// the declaration; none of them names an optimizer. Each optimizer lives in its own file pair of
// this folder and is listed once, with its hyperparameters' spec, in framework/optim/registry.def.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/shard_reductions.hpp"
#include "framework/train/state_store.hpp"
#include "framework/train/value_staging.hpp"

namespace strata::optim {

// How long a state tensor is in a unit's owned slice [lo, hi), and how ZeRO may cut it.
enum class StateShape {
  elements,     // one value per element of the slice: cut anywhere
  vectors,      // one value per owned element of the parameters with fewer than 2 dims (or
                // none), packed in parameter order: cut anywhere
  blocks,       // one value per `count`-element block of the unit's flat buffer in the slice:
                // cut at block boundaries only (the ParamStore pads units: state_pad_multiple)
  factored,     // the rows then the columns of each parameter with >= 2 dims (rows = first dim):
                // whole and equal on every shard (the step reduces its sums over the shards)
  per_param,    // `count` values per parameter of the unit: whole and equal on every shard
  rank_errors,  // this rank's compression errors of the tensors the compressed exchange averages
                // (optim/onebit_adam.hpp's sizes): count 0, one tensor per parameter; count 1,
                // every parameter of the store as one tensor, kept on the first parameter
};

struct StateTensor {
  std::string kind;  // the checkpoint's dataset kind ("exp_avg"; factored: kind_row, kind_col)
  DType dtype = DType::f32;
  StateShape shape = StateShape::elements;
  std::int64_t count = 0;  // blocks: elements per block; per_param: values per parameter
  std::string entry;       // blocks: state entry "<first param>#<entry>"; per_param: "<param>#<entry>"

  static StateTensor elements(std::string kind, DType dt = DType::f32) {
    return {std::move(kind), dt, StateShape::elements, 0, ""};
  }
  static StateTensor vectors(std::string kind) {
    return {std::move(kind), DType::f32, StateShape::vectors, 0, ""};
  }
  static StateTensor blocks(std::string kind, std::int64_t block, std::string entry) {
    return {std::move(kind), DType::f32, StateShape::blocks, block, std::move(entry)};
  }
  static StateTensor factored(std::string kind) {
    return {std::move(kind), DType::f32, StateShape::factored, 0, ""};
  }
  static StateTensor per_param(std::string kind, std::int64_t count, std::string entry) {
    return {std::move(kind), DType::f32, StateShape::per_param, count, std::move(entry)};
  }
  // fused: one tensor of every parameter (count 1), else one per parameter.
  static StateTensor rank_errors(std::string kind, bool fused) {
    return {std::move(kind), DType::f32, StateShape::rank_errors, fused ? 1 : 0, ""};
  }
};

// What an optimizer does not run with, each as the reason a one-line error gives ("" = runs).
// (Updates in backward need unit_steps.)
struct Refusals {
  std::string tensor_parallel;  // strata.tensor_parallel_size > 1
  std::string model_parallel;   // tensor or pipeline parallelism (one message names both)
  std::string zero;             // zero_optimization.stage >= 1
  // strata.device "cuda" with the state on the GPU (offload_optimizer "none"): an optimizer
  // without CUDA kernels still runs on a GPU job when its state is offloaded, where its update
  // runs on the host (train/value_staging.hpp).
  std::string gpu;
};

struct Declaration {
  std::string name;             // the config's optimizer.type: "AdamW"
  std::string checkpoint_name;  // what a checkpoint's manifest records: "adamw"
  std::vector<StateTensor> state;
  // The update of a unit needs only that unit (UnitStepOptimizer): units may be updated one by
  // one, in backward.
  bool unit_steps = false;
  // Reductions over shards the step uses: ShardReductions::sum_vector (the engine supplies it over
  // the ZeRO shards; the Trainer gives an optimizer not declaring shard_sums one that fails); the
  // compressed exchange over the data-parallel ranks (ShardReductions::compressed_average, which
  // the engine provides only to optimizers declaring it, and the Trainer requires of them on
  // several ranks).
  bool shard_sums = false;
  bool compressed_exchange = false;
  Refusals refusals;
  std::string state_words = "moments";  // how a memory line names the state ("8-bit m, v")
};

// One update: 1-based update count, the scheduled rate, the factor every gradient is multiplied by
// (loss-scale unscaling times the clipping coefficient).
struct StepArgs {
  std::int64_t step = 1;
  double lr = 0;
  float grad_scale = 1.0f;
};

// Unit u's owned slice [lo, hi) as an update reads and writes it (held by update_units).
struct UnitSlice {
  std::size_t unit = 0;
  const nn::UnitLayout* layout = nullptr;
  train::UnitOptimizerState* state = nullptr;
  Tensor master;   // the f32 masters: the Trainer's copy, or the parameters themselves when f32
  Tensor param16;  // the 16-bit parameters, written from the masters (undefined when f32)
  Tensor grad;     // the owned gradients (the parameters' dtype), resident
  TensorOptions workspace;
  bool meta() const { return grad.device().is_meta(); }
  // f(begin, end, parameter) for each parameter's part of the slice (offsets into the slice).
  void for_each_param(const std::function<void(std::int64_t, std::int64_t, const nn::Parameter&)>& f) const;
  // The owned gradients as f32 (16-bit ones widened into `keep`, on the workspace; on the meta
  // device only charged).
  const float* f32_grad(Tensor& keep) const;
};

// What a whole step works on.
struct StepContext {
  nn::ParamStore& store;
  train::OptimizerStateStore& states;
  const train::ShardReductions& red;
  // Where the value slices are staged for the update when they live apart from the state (a GPU
  // with offload: train/value_staging.hpp); null when they live beside it. Every value slice an
  // update reads or writes is a ValueSlice, never the store's slice directly.
  train::ValueStaging* staging = nullptr;
  bool meta() const { return store.options().memory.device.is_meta(); }
};

// Unit u's owned value slice for an update, where the state is (staged when ctx.staging): get(),
// then finish() after writing it (`dirty`: copied back to the store's slice).
using ValueSlice = train::ValueSlice;

// A rank's compression errors of one parameter in its unit's rank_errors tensor: worker error at
// `worker`, server error at `server`, `size` floats in all.
struct ErrorSlot {
  std::int64_t worker = 0, server = 0, size = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  const Declaration& declaration() const { return decl_; }
  const std::string& name() const { return decl_.name; }

  // The rate the LR schedule scales (optimizer.params.lr).
  virtual double lr() const = 0;
  virtual std::unique_ptr<Optimizer> clone() const = 0;
  // The config block that makes this optimizer (the inverse of its from_config).
  virtual void to_config(config::Optimizer& out) const = 0;
  // Before the first step, on the Trainer's own clone: checks the hyperparameters and the store's
  // layout (UserError naming what is wrong) and keeps what the step needs per unit. `ranks`: the
  // ranks of the compressed exchange (ShardReductions::ranks).
  virtual void bind(const nn::ParamStore& store, int ranks) = 0;
  // One update of every unit's owned slice. Returns the rate it used (the scheduled one, or the
  // optimizer's own: Adafactor's relative step).
  virtual double step(StepContext& ctx, const StepArgs& a) = 0;
  // Whether update `step` folds each rank's own gradients into its state (the engine then skips
  // the gradient all-reduce): 1-bit's compressed phase.
  virtual bool local_gradients(std::int64_t /*step*/) const { return false; }
  // A checkpoint's state this optimizer cannot continue from though it has its name (Adafactor
  // saved without a first moment): UserError naming dir and what to change. has(kind, name): the
  // checkpoint holds that dataset.
  virtual void check_checkpoint(
      const std::function<bool(std::string_view, std::string_view)>& /*has*/,
      const nn::ParamStore& /*store*/, const std::string& /*dir*/) const {}

 protected:
  explicit Optimizer(Declaration d) : decl_(std::move(d)) {}
  Optimizer(const Optimizer&) = default;
  Declaration decl_;
};

// An optimizer whose update of a unit needs only that unit (AdamW, SGD, AdamW8bit, Lion,
// Lion8bit): step() updates every unit in order; the Trainer may also update units one by one as
// backward completes their gradients.
class UnitStepOptimizer : public Optimizer {
 public:
  // The update of one unit's owned slice (on the meta device: what it charges, nothing computed).
  virtual void update_unit(UnitSlice& s, const StepArgs& a) = 0;
  double step(StepContext& ctx, const StepArgs& a) override;

 protected:
  explicit UnitStepOptimizer(Declaration d) : Optimizer(std::move(d)) { decl_.unit_steps = true; }
  UnitStepOptimizer(const UnitStepOptimizer&) = default;
};

// ---- the declarations, read ----

// Parameters with >= 2 dims and elements are "matrices" (factored state), the others "vectors".
struct ParamGeometry {
  std::size_t index = 0;  // in the unit
  std::int64_t offset = 0, numel = 0;
  bool matrix = false;
  std::int64_t rows = 0, cols = 0;
  std::int64_t a = 0, b = 0;  // owned part, flat positions in the unit (a >= b: none)
  std::int64_t fac = 0;       // matrices: rows at `fac` of the factored tensor, columns after
  std::int64_t v = 0;         // vectors: offset of the owned part in the vectors tensor
};
std::vector<ParamGeometry> param_geometry(const nn::UnitLayout& l);

// Blocks of `block` elements in n elements.
inline std::int64_t block_count(std::int64_t n, std::int64_t block) { return (n + block - 1) / block; }

// Unit u's rank_errors slots (one per parameter, size 0 where it keeps none) for an exchange over
// `ranks` ranks; empty when the optimizer declares no rank_errors.
std::vector<ErrorSlot> error_slots(const Declaration& d, const nn::ParamStore& store, std::size_t u,
                                   int ranks);
// What a state store allocates for unit u.
train::StateLayout unit_state_layout(const Declaration& d, const nn::ParamStore& store,
                                     std::size_t u, int ranks);
// The ParamStore pad_multiple for `shard_count` shards: every owned slice whole blocks of each
// blocks tensor (its count × shard_count); 1 without blocks.
int state_pad_multiple(const Declaration& d, int shard_count);
// "AdamW, SGD and Lion" (conjunction "and", or "or"): the registered optimizers' names for which
// keep(declaration) holds.
std::string optimizer_names(const std::function<bool(const Declaration&)>& keep,
                            std::string_view conjunction = "and");

// ---- the unit loop ----

// Updates every unit in order: its state acquired, its 16-bit values acquired to be overwritten
// from the masters (read when f32), its gradients acquired; f(slice); all released (state and
// values dirty).
void update_units(StepContext& ctx, const std::function<void(UnitSlice&)>& f);
// One unit the same way; `grad`: its owned gradients when the caller holds them (resident), else
// acquired.
void update_unit_of(StepContext& ctx, std::size_t u, const Tensor* grad,
                    const std::function<void(UnitSlice&)>& f);
// The planner's step (meta device) of an optimizer whose kernels run on host pointers: every
// unit's state, value and gradient slices acquired and released as a real step does, with the f32
// copy of a 16-bit gradient its kernels read, and `workspace` f32 tensors of these lengths held
// throughout; nothing computed.
void meta_pass(StepContext& ctx, const std::vector<std::int64_t>& workspace = {});

}  // namespace strata::optim
