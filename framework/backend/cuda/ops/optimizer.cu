// The optimizer update kernels: AdamW, SGD and Lion, one pass over the buffers, each element
// independent (no reduction: the result cannot depend on the launch shape or on scheduling, so
// it is deterministic); AdamW8bit and Lion8bit, one thread block per quantization block (its
// only reduction is the block's absmax, a max: exact in any order). The per-element work is adamw_at / sgd_at of optimizer.hpp — the very
// functions the CPU-only test checks bitwise against the CPU's reference — so these kernels only
// choose which elements each thread visits.
//
// Launch: 256 threads per block, a grid-stride loop over at most kMaxBlocks blocks (enough to
// fill an H100/H200 about twice over; larger buffers take several iterations per thread).
// Memory-bound: coalesced scalar loads and stores, no shared memory, no synchronisation.
#include <mutex>
#include <set>

#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/optimizer.hpp"

namespace strata::cuda_ops {
namespace {

// The 8-bit codes on each device: {signed, unsigned} (ensure_q8_codes).
__device__ Q8Code g_q8_codes[2];

constexpr unsigned kThreads = 256;
constexpr std::int64_t kMaxBlocks = 2048;

unsigned grid(std::int64_t n) { return grid_for(n, kThreads, kMaxBlocks); }

// Constants by value (kernel parameters: the same float32 bits the CPU uses).
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* p, const void* g, DT gdt, float* m, float* v, std::int64_t n,
                 optim::detail::AdamWConsts c, void* p16, DT hdt) {
  STRATA_GRID_STRIDE(i, n) adamw_at(i, p, g, gdt, m, v, p16, hdt, c);
}

__global__ void __launch_bounds__(kThreads)
    sgd_kernel(float* p, const void* g, DT gdt, float* buf, std::int64_t n,
               optim::detail::SgdConsts c, void* p16, DT hdt) {
  STRATA_GRID_STRIDE(i, n) sgd_at(i, p, g, gdt, buf, p16, hdt, c);
}

__global__ void __launch_bounds__(kThreads)
    lion_kernel(float* p, const void* g, DT gdt, float* m, std::int64_t n,
                optim::detail::LionConsts c, void* p16, DT hdt) {
  STRATA_GRID_STRIDE(i, n) lion_at(i, p, g, gdt, m, p16, hdt, c);
}

// ---- the 8-bit updates: block b of the grid is quantization block b ----
// Thread t visits elements t, t + 256, ... of its block (kQ8Per of them, kept in registers
// between the update and the requantization). The absmax is a max (exact in any order).
constexpr int kQ8Per = kQ8Block / static_cast<int>(kThreads);
static_assert(kQ8Per * static_cast<int>(kThreads) == kQ8Block);

// The code's values and thresholds into shared memory (kThreads >= 256 > k).
__device__ __forceinline__ void load_code(const Q8Code& c, float* values, std::uint32_t* thr) {
  const int t = static_cast<int>(threadIdx.x);
  values[t] = c.values[t];
  if (t < c.k) thr[t] = c.thresholds[t];
}

// The runs' words: those passed by value copied into `words` (shared memory, kThreads >=
// kQ8InlineRuns), else the device copy. Read after the next __syncthreads.
__device__ __forceinline__ const std::int64_t* load_runs(const Q8Runs& runs, std::int64_t* words) {
  const int t = static_cast<int>(threadIdx.x);
  if (!runs.is_inline()) return runs.device;
  if (t < runs.n) words[t] = runs.words[t];
  return words;
}
static_assert(static_cast<int>(kThreads) >= kQ8InlineRuns);

__global__ void __launch_bounds__(kThreads)
    adamw8bit_kernel(float* p, const void* g, DT gdt, std::uint8_t* mq, std::uint8_t* vq,
                     float* mabs, float* vabs, std::int64_t n, Q8Runs rs,
                     optim::detail::AdamWConsts cd,
                     optim::detail::AdamWConsts cn, void* p16, DT hdt) {
  __shared__ float mval[256];
  __shared__ float vval[256];
  __shared__ std::uint32_t mthr[255];
  __shared__ std::uint32_t vthr[255];
  __shared__ float scratch[32];
  __shared__ std::int64_t words[kQ8InlineRuns];
  const std::int64_t* runs = load_runs(rs, words);
  const int nruns = rs.n;
  load_code(g_q8_codes[0], mval, mthr);
  load_code(g_q8_codes[1], vval, vthr);
  const int km = g_q8_codes[0].k, kv = g_q8_codes[1].k;
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.x) * kQ8Block;
  const int len = static_cast<int>(n - b0 < kQ8Block ? n - b0 : kQ8Block);
  const float ma = mabs[blockIdx.x], va = vabs[blockIdx.x];
  float mr[kQ8Per], vr[kQ8Per];
  float mmax = 0.0f, vmax = 0.0f;
  int r = t < len ? q8_run_of(runs, nruns, b0 + t) : 0;
  for (int k = 0; k < kQ8Per; ++k) {
    const int j = t + k * static_cast<int>(kThreads);
    if (j >= len) break;
    const std::int64_t i = b0 + j;
    while ((runs[r] >> 1) <= i) ++r;
    const optim::detail::AdamWConsts& c = (runs[r] & 1) ? cd : cn;
    float pi = p[i];
    float mi = ieee::mul(mval[mq[i]], ma), vi = ieee::mul(vval[vq[i]], va);
    const float gi = load(g, gdt, i);
    if (c.small_w) adamw_update<true>(pi, gi, mi, vi, c);
    else adamw_update<false>(pi, gi, mi, vi, c);
    p[i] = pi;
    if (p16) store(p16, hdt, i, pi);
    mr[k] = mi;
    vr[k] = vi;
    mmax = q8_absmax_step(mmax, mi);
    vmax = q8_absmax_step(vmax, vi);
  }
  // Every thread has read the old absmax before any writes the new one (block_max synchronises).
  const float am = block_max(mmax, scratch);
  const float av = block_max(vmax, scratch);
  if (t == 0) {
    mabs[blockIdx.x] = am;
    vabs[blockIdx.x] = av;
  }
  for (int k = 0; k < kQ8Per; ++k) {
    const int j = t + k * static_cast<int>(kThreads);
    if (j >= len) break;
    const std::int64_t i = b0 + j;
    mq[i] = am > 0.0f ? q8_byte(mthr, km, true, ieee::div(mr[k], am)) : std::uint8_t{0};
    vq[i] = av > 0.0f ? q8_byte(vthr, kv, false, ieee::div(vr[k], av)) : std::uint8_t{0};
  }
}

__global__ void __launch_bounds__(kThreads)
    lion8bit_kernel(float* p, const void* g, DT gdt, std::uint8_t* mq, float* mabs,
                    std::int64_t n, Q8Runs rs, optim::detail::LionConsts cd, optim::detail::LionConsts cn, void* p16,
                    DT hdt) {
  __shared__ float mval[256];
  __shared__ std::uint32_t mthr[255];
  __shared__ float scratch[32];
  __shared__ std::int64_t words[kQ8InlineRuns];
  const std::int64_t* runs = load_runs(rs, words);
  const int nruns = rs.n;
  load_code(g_q8_codes[0], mval, mthr);
  const int km = g_q8_codes[0].k;
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.x) * kQ8Block;
  const int len = static_cast<int>(n - b0 < kQ8Block ? n - b0 : kQ8Block);
  const float ma = mabs[blockIdx.x];
  float mr[kQ8Per];
  float mmax = 0.0f;
  int r = t < len ? q8_run_of(runs, nruns, b0 + t) : 0;
  for (int k = 0; k < kQ8Per; ++k) {
    const int j = t + k * static_cast<int>(kThreads);
    if (j >= len) break;
    const std::int64_t i = b0 + j;
    while ((runs[r] >> 1) <= i) ++r;
    float pi = p[i];
    float mi = ieee::mul(mval[mq[i]], ma);
    lion_update(pi, load(g, gdt, i), mi, (runs[r] & 1) ? cd : cn);
    p[i] = pi;
    if (p16) store(p16, hdt, i, pi);
    mr[k] = mi;
    mmax = q8_absmax_step(mmax, mi);
  }
  const float am = block_max(mmax, scratch);
  if (t == 0) mabs[blockIdx.x] = am;
  for (int k = 0; k < kQ8Per; ++k) {
    const int j = t + k * static_cast<int>(kThreads);
    if (j >= len) break;
    mq[b0 + j] = am > 0.0f ? q8_byte(mthr, km, true, ieee::div(mr[k], am)) : std::uint8_t{0};
  }
}

unsigned q8_grid(std::int64_t n) { return static_cast<unsigned>((n + kQ8Block - 1) / kQ8Block); }

}  // namespace

cudaError_t ensure_q8_codes() {
  static std::mutex mu;
  static std::set<int> resident;  // the devices that have them
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const std::lock_guard lock(mu);
  if (resident.count(device)) return cudaSuccess;
  const Q8Code codes[2] = {q8_code(optim::QuantMap::signed_dynamic),
                           q8_code(optim::QuantMap::unsigned_dynamic)};
  const cudaError_t e = cudaMemcpyToSymbol(g_q8_codes, codes, sizeof codes);
  if (e == cudaSuccess) resident.insert(device);
  return e;
}

void launch_lion_step(float* master, const void* grad, DT gdt, float* m, std::int64_t n,
                      const optim::detail::LionConsts& c, void* param16, DT hdt, cudaStream_t s) {
  if (n <= 0) return;
  lion_kernel<<<grid(n), kThreads, 0, s>>>(master, grad, gdt, m, n, c, param16, hdt);
}

void launch_adamw8bit_step(float* master, const void* grad, DT gdt, std::uint8_t* m_codes,
                           std::uint8_t* v_codes, float* m_absmax, float* v_absmax,
                           std::int64_t n, const Q8Runs& runs,
                           const optim::detail::AdamWConsts& decayed,
                           const optim::detail::AdamWConsts& undecayed, void* param16, DT hdt,
                           cudaStream_t s) {
  if (n <= 0) return;
  adamw8bit_kernel<<<q8_grid(n), kThreads, 0, s>>>(master, grad, gdt, m_codes, v_codes, m_absmax,
                                                   v_absmax, n, runs, decayed,
                                                   undecayed, param16, hdt);
}

void launch_lion8bit_step(float* master, const void* grad, DT gdt, std::uint8_t* m_codes,
                          float* m_absmax, std::int64_t n, const Q8Runs& runs,
                          const optim::detail::LionConsts& decayed,
                          const optim::detail::LionConsts& undecayed, void* param16, DT hdt,
                          cudaStream_t s) {
  if (n <= 0) return;
  lion8bit_kernel<<<q8_grid(n), kThreads, 0, s>>>(master, grad, gdt, m_codes, m_absmax, n, runs,
                                                  decayed, undecayed, param16, hdt);
}

void launch_adamw_step(float* master, const void* grad, DT gdt, float* m, float* v,
                       std::int64_t n, const optim::detail::AdamWConsts& c, void* param16,
                       DT hdt, cudaStream_t s) {
  if (n <= 0) return;
  adamw_kernel<<<grid(n), kThreads, 0, s>>>(master, grad, gdt, m, v, n, c, param16, hdt);
}

void launch_sgd_step(float* master, const void* grad, DT gdt, float* momentum_buf,
                     std::int64_t n, const optim::detail::SgdConsts& c, void* param16, DT hdt,
                     cudaStream_t s) {
  if (n <= 0) return;
  // Without momentum the buffer is never touched: pass null so that no stray tensor is read.
  float* buf = c.momentum ? momentum_buf : nullptr;
  sgd_kernel<<<grid(n), kThreads, 0, s>>>(master, grad, gdt, buf, n, c, param16, hdt);
}

}  // namespace strata::cuda_ops
