// What a multi-pass update (Adafactor, LAMB: optimizers declaring shard_sums) keeps during one
// step, where the update runs (the optimizer state's side: a GPU's memory, or the host's):
//   - StepSums: f64 partial sums the op kernels accumulate into (ops::adafactor_*, lamb_sums),
//     added over the ZeRO shards by ShardReductions::sum_vector (host doubles): on a GPU copied
//     down once per reduction (one host synchronisation per reduction, not per parameter), and
//     back up when the kernels read the reduced sums again;
//   - step_scratch: an f32 buffer of the step (Adafactor's statistics and factors of every unit).
// On the host both are uncharged heap memory, as the std::vectors they replaced (the planner's
// meta pass charges nothing for them either); on a GPU they are device workspace, charged, which
// the planner does not predict yet (Adafactor: 16 bytes per row and column of every matrix and 24
// per parameter; LAMB: 16 per parameter: small beside the state).
#pragma once

#include <span>
#include <vector>

#include "framework/core/tensor.hpp"
#include "framework/train/shard_reductions.hpp"

namespace strata::optim {

// Where an update of state in `state_tier` runs: the store's device for resident state, else the
// host.
inline Device update_device(Tier state_tier, Device store_device) {
  return state_tier == Tier::device ? store_device : Device::cpu();
}

// n zeros of dtype on `where` (see above); `work`: the options a GPU's workspace is charged with.
Tensor step_scratch(Device where, std::int64_t n, DType dtype, const TensorOptions& work);

class StepSums {
 public:
  StepSums(Device where, std::size_t n, const TensorOptions& work);
  StepSums(const StepSums&) = delete;
  StepSums& operator=(const StepSums&) = delete;
  // The sums [at, at + n) as an f64 tensor where the kernels run.
  Tensor slice(std::size_t at, std::size_t n) const {
    return sums_.slice(0, static_cast<std::int64_t>(at), static_cast<std::int64_t>(at + n));
  }
  // Every shard's sums added (red.sum_vector); `back`: the kernels read them again afterwards.
  void reduce(const train::ShardReductions& red, bool back);
  // The sums on the host as the kernels left them, not added over the shards (1-bit LAMB's
  // per-parameter sums: its units are whole on every rank).
  void fetch();
  // The reduced sums on the host (after reduce(), or fetch()).
  const std::vector<double>& host() const { return host_; }

 private:
  std::vector<double> host_;
  Tensor sums_;     // host_ itself on the host; the device's copy on a GPU
  Tensor host_view_;
};

}  // namespace strata::optim
