// The optimizer ops on CUDA tensors (optimizer.cu has the kernels). The float32 scalars of the
// step come from the CPU's own code (optim::detail::adamw_consts / sgd_consts: the same
// validation and errors, the same bits), so a step on the GPU is bitwise a step on the CPU.
// ops.cpp has checked the tensors: master and the state f32, grad any float dtype, param16 (when
// given) bf16 or f16, all of master's numel, contiguous, on one CUDA device.
#include <vector>

#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/optimizer.hpp"

namespace strata::cuda_ops {

namespace {
float* f32_ptr(const Tensor& t) { return static_cast<float*>(t.raw()); }
void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw() : nullptr; }
DT dt_or_bf16(const Tensor& t) { return t.defined() ? dt(t) : DT::bf16; }  // unused when undefined
std::uint8_t* u8_ptr(const Tensor& t) { return static_cast<std::uint8_t*>(t.raw()); }

// The decay runs as the kernels take them: by value when they fit in Q8Runs (nothing copied),
// else in a workspace copied from pageable host memory on the op's stream (cudaMemcpyAsync
// returns once it has taken the bytes; the workspace is released after the kernel,
// stream-ordered).
struct Q8RunArgs {
  Tensor buf;  // defined only when the runs do not fit by value
  Q8Runs runs;
};

Q8RunArgs q8_run_args(const Tensor& like, std::span<const optim::DecayRun> runs) {
  std::vector<std::int64_t> words(runs.size());
  for (std::size_t r = 0; r < runs.size(); ++r)
    words[r] = static_cast<std::int64_t>(runs[r].end) << 1 | (runs[r].decay ? 1 : 0);
  const int n = static_cast<int>(words.size());
  Q8RunArgs a;
  // More than kQ8InlineRuns runs: q8_runs_workspace_bytes (workspace_sizes.hpp, the plan's too).
  if (const std::int64_t ws = q8_runs_workspace_bytes(n); ws > 0) {
    const auto bytes = static_cast<std::size_t>(ws);
    static_assert(sizeof(std::int64_t) == 8, "8 bytes a run");
    a.buf = workspace(like, Shape{ws}, DType::u8);
    check_cuda(cudaMemcpyAsync(a.buf.raw(), words.data(), bytes, cudaMemcpyHostToDevice,
                               stream_of(like)),
               "the 8-bit update's decay runs");
  }
  a.runs = q8_runs(words.data(), n,
                   a.buf.defined() ? static_cast<const std::int64_t*>(a.buf.raw()) : nullptr);
  return a;
}
}  // namespace

void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                const Tensor& param16) {
  // Validates h and step (throws before anything is queued), as the CPU's update does.
  const optim::detail::AdamWConsts c = optim::detail::adamw_consts(h, step, grad_scale);
  launch_adamw_step(f32_ptr(master), grad.raw(), dt(grad), f32_ptr(m), f32_ptr(v),
                    master.numel(), c, raw_or_null(param16), dt_or_bf16(param16),
                    stream_of(master));
  check_launch("adamw_step");
}

void sgd_step(const Tensor& master, const Tensor& grad, const Tensor& momentum,
              const optim::SGDHyper& h, std::int64_t step, float grad_scale,
              const Tensor& param16) {
  const optim::detail::SgdConsts c = optim::detail::sgd_consts(h, step, grad_scale);
  // The buffer is used only with momentum (ops.cpp has then checked it: f32, master's numel);
  // without, it may be undefined and is not touched.
  float* buf = c.momentum ? f32_ptr(momentum) : nullptr;
  launch_sgd_step(f32_ptr(master), grad.raw(), dt(grad), buf, master.numel(), c,
                  raw_or_null(param16), dt_or_bf16(param16), stream_of(master));
  check_launch("sgd_step");
}

void lion_step(const Tensor& master, const Tensor& grad, const Tensor& m,
               const optim::LionHyper& h, std::int64_t step, float grad_scale,
               const Tensor& param16) {
  const optim::detail::LionConsts c = optim::detail::lion_consts(h, step, grad_scale);
  launch_lion_step(f32_ptr(master), grad.raw(), dt(grad), f32_ptr(m), master.numel(), c,
                   raw_or_null(param16), dt_or_bf16(param16), stream_of(master));
  check_launch("lion_step");
}

// ops.cpp has also checked the codes (u8, master's numel), the absmax (f32, one per block) and
// that the runs cover [0, n) in order.
void adamw8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                    const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                    std::span<const optim::DecayRun> runs, const optim::AdamWHyper& h,
                    std::int64_t step, float grad_scale, const Tensor& param16) {
  // The CPU's constants: those of the decayed runs and those with weight_decay 0.
  optim::AdamWHyper h0 = h;
  h0.weight_decay = 0;
  const optim::detail::AdamWConsts cd = optim::detail::adamw_consts(h, step, grad_scale);
  const optim::detail::AdamWConsts cn = optim::detail::adamw_consts(h0, step, grad_scale);
  if (master.numel() == 0) return;
  check_cuda(ensure_q8_codes(), "the 8-bit optimizers' codes (copied once per device)");
  const Q8RunArgs ra = q8_run_args(master, runs);
  launch_adamw8bit_step(f32_ptr(master), grad.raw(), dt(grad), u8_ptr(m_codes), u8_ptr(v_codes),
                        f32_ptr(m_absmax), f32_ptr(v_absmax), master.numel(), ra.runs, cd, cn, raw_or_null(param16), dt_or_bf16(param16),
                        stream_of(master));
  check_launch("adamw8bit_step");
}

void lion8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                   const Tensor& m_absmax, std::span<const optim::DecayRun> runs,
                   const optim::LionHyper& h, std::int64_t step, float grad_scale,
                   const Tensor& param16) {
  const optim::detail::LionConsts cd = optim::detail::lion_consts(h, step, grad_scale);
  optim::detail::LionConsts cn = cd;
  cn.decay = 1.0f;  // f(1 - lr * 0), as lion.cpp's undecayed runs
  if (master.numel() == 0) return;
  check_cuda(ensure_q8_codes(), "the 8-bit optimizers' codes (copied once per device)");
  const Q8RunArgs ra = q8_run_args(master, runs);
  launch_lion8bit_step(f32_ptr(master), grad.raw(), dt(grad), u8_ptr(m_codes), f32_ptr(m_absmax),
                       master.numel(), ra.runs, cd, cn,
                       raw_or_null(param16), dt_or_bf16(param16), stream_of(master));
  check_launch("lion8bit_step");
}

}  // namespace strata::cuda_ops
