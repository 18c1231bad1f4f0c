// The offload layer's entry points for a training job: check the configured offload against the
// ZeRO stage and the machine, and build the optimizer-state store the config asks for (the
// parameter-slice store is make_value_shard_store in offload/value_shard_store.hpp).
#pragma once

#include <memory>
#include <string>

#include "framework/config/config.hpp"
#include "framework/core/tensor.hpp"
#include "framework/train/state_store.hpp"
#include "offload/swapper.hpp"

namespace strata::offload {

// Throws UserError ("[offload] ...", naming the key) when zero_optimization.offload_optimizer /
// offload_param cannot run as configured: offload without the ZeRO stage it needs (optimizer:
// >= 1, parameters: 3), an nvme_path that is unset, not a writable directory or inside the
// checkpoint directory, buffer_count < 2 for nvme, aio.block_size not a multiple of 4096,
// offload_param.buffer_size / max_in_cpu other than their defaults (not supported), io_uring or
// O_DIRECT unavailable there. Creates nvme_path if missing. check_machine = false (a plan for
// another machine) checks the config only: nothing on this machine's disks.
void validate(const config::Config& cfg, int zero_stage, bool check_machine = true);

// The optimizer-state store for offload_optimizer.device: nullptr for "none" (the Trainer keeps
// state resident beside the parameters), a host store for "cpu", an NVMe swapper for "nvme"
// (swap file per rank under nvme_path). Host and NVMe bytes are charged to memory.ledger. With
// memory.device meta (a plan) the stores are charged the same and hold nothing, touching no disk.
std::unique_ptr<train::OptimizerStateStore> make_state_store(const config::Config& cfg, int rank,
                                                             const TensorOptions& memory);

// The swapper of an NVMe store: its directory, rank, buffers and pinning, aio from the config.
SwapperOptions swapper_options(const config::Config& cfg, const std::string& dir, int rank,
                               std::int64_t buffer_count, bool pin, const TensorOptions& memory);

// One line for logs: where optimizer state, gradients and parameters live, e.g. "optimizer
// state on nvme (/mnt/nvme, 4 buffers, io_uring 8 x 1.00 MiB x 1 thread(s)); gradients on nvme (a
// grads swap file beside it); parameters as owned slices on the host".
std::string describe(const config::Config& cfg);

}  // namespace strata::offload
