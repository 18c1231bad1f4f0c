// The meta device's two flavours (framework/core/device.hpp: tensors with a size and no memory,
// on which the memory planner runs a real training step). Both charge the ledger and allocate
// nothing; they differ in the op table a meta operand selects (framework/backend/ops/ops.cpp),
// i.e. in the workspace the step's ops are charged:
//   - Device::meta() (index 0): what the CPU backend's ops allocate (meta_table.cpp). A plan of a
//     CPU job, and the host tier of a GPU job's plan (offloaded updates run on the host).
//   - meta_cuda() (index 1): what the CUDA backend's ops allocate (meta_cuda_table.cpp). The device
//     tier of a GPU job's plan (strata.device "cuda": parallel/plan/planner.cpp).
// Everything else treats the two alike (Device::is_meta()).
#pragma once

#include "framework/core/device.hpp"

namespace strata {

inline Device meta_cuda() { return {DeviceType::meta, 1}; }
inline bool is_meta_cuda(const Device& d) { return d.is_meta() && d.index == 1; }
// The meta device that plans a job whose device tier is on `real` (cuda: meta_cuda(), else
// Device::meta()).
inline Device meta_for(const Device& real) { return real.is_cuda() ? meta_cuda() : Device::meta(); }

}  // namespace strata
