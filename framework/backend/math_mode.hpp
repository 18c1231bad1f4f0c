// Process-wide choices of how backends may compute, set from the config (strata.allow_tf32) before
// a job's first op. Read by the backends (the CUDA GEMMs); the CPU has no such modes.
#pragma once

namespace strata {

// f32 matrix products on a GPU may use TF32 tensor cores (default: no, exact f32).
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace strata
