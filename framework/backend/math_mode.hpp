// Process-wide choices of how backends may compute, set from the config (strata.allow_tf32,
// strata.allow_rounded_attention) before a job's first op. Read by the backends (the CUDA GEMMs
// and attention kernels); the CPU has no such modes.
#pragma once

namespace strata {

// f32 matrix products on a GPU may use TF32 tensor cores (default: no, exact f32).
void set_allow_tf32(bool allow);
bool allow_tf32();

// The tensor-core attention kernels (16-bit q, k, v on a GPU) may round the probabilities P and
// their gradients dS to the inputs' 16-bit type once before the products P V, P^T dO, dS K and
// dS^T Q, as FlashAttention does (default: no, those products see P and dS to about 2^-16
// relative, split into two 16-bit parts: within 1e-5 of f32 attention).
void set_allow_rounded_attention(bool allow);
bool allow_rounded_attention();

// Sets both modes for a scope and restores the previous ones at its end (tests, benchmarks).
class MathModeGuard {
 public:
  MathModeGuard(bool tf32, bool rounded_attention)
      : tf32_(allow_tf32()), rounded_(allow_rounded_attention()) {
    set_allow_tf32(tf32);
    set_allow_rounded_attention(rounded_attention);
  }
  ~MathModeGuard() {
    set_allow_tf32(tf32_);
    set_allow_rounded_attention(rounded_);
  }
  MathModeGuard(const MathModeGuard&) = delete;
  MathModeGuard& operator=(const MathModeGuard&) = delete;

 private:
  bool tf32_, rounded_;
};

}  // namespace strata
