// The optimizer ops on CUDA tensors (optimizer.cu has the kernels). The float32 scalars of the
// step come from the CPU's own code (optim::detail::adamw_consts / sgd_consts: the same
// validation and errors, the same bits), so a step on the GPU is bitwise a step on the CPU.
// ops.cpp has checked the tensors: master and the state f32, grad any float dtype, param16 (when
// given) bf16 or f16, all of master's numel, contiguous, on one CUDA device.
#include <cstring>
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

// What an 8-bit kernel reads besides the tensors, in one device workspace: the decay runs
// (end << 1 | decayed) and then the codes (AdamW8bit: signed, unsigned; Lion8bit: signed). Copied
// from pageable host memory on the op's stream (cudaMemcpyAsync returns once it has taken the
// bytes); the workspace is released after the kernel, stream-ordered.
struct Q8Aux {
  Tensor buf;
  const std::int64_t* runs = nullptr;
  const Q8Code* codes = nullptr;
  int nruns = 0;
};

Q8Aux q8_aux(const Tensor& like, std::span<const optim::DecayRun> runs, bool with_unsigned) {
  static const Q8Code code_s = q8_code(optim::QuantMap::signed_dynamic);
  static const Q8Code code_u = q8_code(optim::QuantMap::unsigned_dynamic);
  const std::size_t run_bytes = runs.size() * sizeof(std::int64_t);
  const std::size_t ncodes = with_unsigned ? 2 : 1;
  std::vector<unsigned char> host(run_bytes + ncodes * sizeof(Q8Code));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const std::int64_t e = static_cast<std::int64_t>(runs[r].end) << 1 | (runs[r].decay ? 1 : 0);
    std::memcpy(host.data() + r * sizeof(std::int64_t), &e, sizeof e);
  }
  std::memcpy(host.data() + run_bytes, &code_s, sizeof(Q8Code));
  if (with_unsigned) std::memcpy(host.data() + run_bytes + sizeof(Q8Code), &code_u, sizeof(Q8Code));
  Q8Aux a;
  a.buf = workspace(like, Shape{static_cast<std::int64_t>(host.size())}, DType::u8);
  check_cuda(cudaMemcpyAsync(a.buf.raw(), host.data(), host.size(), cudaMemcpyHostToDevice,
                             stream_of(like)),
             "the 8-bit update's runs and codes");
  auto* base = static_cast<unsigned char*>(a.buf.raw());
  a.runs = reinterpret_cast<const std::int64_t*>(base);
  a.codes = reinterpret_cast<const Q8Code*>(base + run_bytes);
  a.nruns = static_cast<int>(runs.size());
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
  const Q8Aux aux = q8_aux(master, runs, true);
  launch_adamw8bit_step(f32_ptr(master), grad.raw(), dt(grad), u8_ptr(m_codes), u8_ptr(v_codes),
                        f32_ptr(m_absmax), f32_ptr(v_absmax), master.numel(), aux.runs, aux.nruns,
                        aux.codes, cd, cn, raw_or_null(param16), dt_or_bf16(param16),
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
  const Q8Aux aux = q8_aux(master, runs, false);
  launch_lion8bit_step(f32_ptr(master), grad.raw(), dt(grad), u8_ptr(m_codes), f32_ptr(m_absmax),
                       master.numel(), aux.runs, aux.nruns, aux.codes, cd, cn,
                       raw_or_null(param16), dt_or_bf16(param16), stream_of(master));
  check_launch("lion8bit_step");
}

}  // namespace strata::cuda_ops
