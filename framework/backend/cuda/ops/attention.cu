// Fused causal multi-head self-attention, flash-attention style, on CUDA cores (f32 FFMA). For
// qkv (and dout) of one 16-bit type on compute capability >= 8.0, the launchers below run the
// tensor-core kernels of attention_mma.cu instead (same algorithm and determinism; use_mma).
//
// Forward: one thread block per (batch, head, block of BQ query rows). It walks the key/value tiles
// up to the diagonal, keeping the running row max m and row sum l of the online softmax and the
// unnormalised output O in registers; at the end out = O / l and lse = m + log(l). The T x T
// scores are never materialised.
//
// Backward (deterministic, no atomics):
//   1. D[b, h, t] = dout[b, t, h, :] . out[b, t, h, :]               (one warp per row)
//   2. dK/dV: one block per (batch, head, tile of BKV keys); it loops over the query tiles at or
//      after its keys, in increasing order, recomputing P = exp(scale S - lse), dP = dO V^T,
//      dS = P (dP - D), and accumulating dV += P^T dO and dK += dS^T Q in registers (scaled once at
//      the end).
//   3. dQ: one block per (batch, head, tile of BQ queries); it loops over the key tiles up to the
//      diagonal in increasing order, accumulating dQ += dS K in registers (scaled once at the end).
// Every output element is produced by exactly one thread, summing in a fixed order, so the results
// are bitwise the same run after run.
//
// All kernels use 256 threads viewed as a 16 x 16 grid: tx = threadIdx.x % 16 (16 consecutive
// lanes, half a warp) and ty = threadIdx.x / 16. The head size hs (1..128) is padded to D in
// {16, 32, 64, 128} (a template parameter): shared-memory columns d >= hs and rows past T are
// filled with zeros, so they add nothing to any dot product, and are never stored.
//
// Shared-memory layouts are chosen so that the inner loops read either a broadcast vector
// (float2/float4 of one thread's contiguous rows, identical across the half-warp) or 16
// consecutive words (conflict-free): tiles read "by row" use a row stride of D + 1 (odd), tiles
// read "by column" are stored transposed with a row stride that is a multiple of 4 (16-byte
// aligned vectors). Every block needs at most 59 KiB (static_asserts below keep it under the 64 KiB
// a T4 allows); above 48 KB it is opted in once per kernel and device with cudaFuncSetAttribute.
#include <cstddef>

#include "framework/backend/cuda/ops/attention.hpp"
#include "framework/backend/cuda/ops/attention_mma.hpp"
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/device_caps.hpp"

namespace strata::cuda_ops {
namespace {

constexpr int kThreads = 256;                // every kernel here; a 16 x 16 grid of threads
constexpr int kTX = 16;                      // threads along x (half a warp)
constexpr std::size_t kSmemCap = 64 * 1024;  // the smallest opt-in limit we target (sm_75)

// ---- small device helpers -----------------------------------------------------------------------

// Max and sum over the 16 lanes of a half-warp (xor offsets < 16 stay inside it). Every lane gets
// bitwise the same result (a + b == b + a), in the same order every run.
__device__ __forceinline__ float halfwarp_max(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float halfwarp_sum(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// N contiguous floats of shared memory to registers and back; p is 16-byte aligned for N % 4 == 0
// and 8-byte aligned for N % 2 == 0 (the layouts below guarantee it).
template <int N>
__device__ __forceinline__ void lds(const float* p, float (&v)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 t = *reinterpret_cast<const float4*>(p + i);
      v[i] = t.x;
      v[i + 1] = t.y;
      v[i + 2] = t.z;
      v[i + 3] = t.w;
    }
  } else if constexpr (N % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      const float2 t = *reinterpret_cast<const float2*>(p + i);
      v[i] = t.x;
      v[i + 1] = t.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = p[i];
  }
}
template <int N>
__device__ __forceinline__ void sts(float* p, const float (&v)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      *reinterpret_cast<float4*>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else if constexpr (N % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 2) *reinterpret_cast<float2*>(p + i) = make_float2(v[i], v[i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = v[i];
  }
}

// Copies rows [t0, t0 + ROWS) of one head's slice of a row-major tensor into shared memory:
// element (r, d) (r < ROWS, d < D) of the tile goes to dst[r * rs + d * ds] (rs = row stride,
// ds = 1 for a row-major tile, rs = 1 and ds = row stride for a transposed one). The source row t
// starts at element base + t * ld of x; rows t >= T and columns d >= hs are zeros. Consecutive
// threads take consecutive d (coalesced global reads).
template <int ROWS, int D>
__device__ __forceinline__ void load_tile(float* dst, int rs, int ds, const void* x, DT xdt,
                                          std::int64_t base, std::int64_t ld, int t0, int T,
                                          int hs) {
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;  // D is a power of two: shifts
    const int t = t0 + r;
    float v = 0.0f;
    if (t < T && d < hs) v = load(x, xdt, base + static_cast<std::int64_t>(t) * ld + d);
    dst[r * rs + d * ds] = v;
  }
}

// ---- tile configurations ------------------------------------------------------------------------

// MB is __launch_bounds__'s minimum of resident blocks per SM, i.e. a register cap of
// 65536 / (256 * MB) per thread: the largest that compiles without spills for sm_75, sm_80 and
// sm_90 (checked with -Xptxas -v). Shared memory allows 2 to 4 blocks of these sizes per SM on an
// H100.
// clang-format off
// Forward: BQ query rows per block, BK keys per tile.
template <int D> struct FwdCfg;
template <> struct FwdCfg<16> { static constexpr int BQ = 64, BK = 64, MB = 3; };
template <> struct FwdCfg<32> { static constexpr int BQ = 64, BK = 64, MB = 3; };
template <> struct FwdCfg<64> { static constexpr int BQ = 64, BK = 64, MB = 3; };
template <> struct FwdCfg<128> { static constexpr int BQ = 64, BK = 32, MB = 3; };

// dQ: BQ query rows per block, BK keys per tile.
template <int D> struct DqCfg;
template <> struct DqCfg<16> { static constexpr int BQ = 64, BK = 64, MB = 2; };
template <> struct DqCfg<32> { static constexpr int BQ = 64, BK = 32, MB = 3; };
template <> struct DqCfg<64> { static constexpr int BQ = 64, BK = 32, MB = 3; };
template <> struct DqCfg<128> { static constexpr int BQ = 32, BK = 16, MB = 3; };

// dK/dV: BKV keys per block, BQ query rows per tile.
template <int D> struct DkvCfg;
template <> struct DkvCfg<16> { static constexpr int BKV = 64, BQ = 64, MB = 2; };
template <> struct DkvCfg<32> { static constexpr int BKV = 64, BQ = 64, MB = 2; };
template <> struct DkvCfg<64> { static constexpr int BKV = 64, BQ = 32, MB = 2; };
template <> struct DkvCfg<128> { static constexpr int BKV = 32, BQ = 16, MB = 3; };
// clang-format on

// Shared-memory floats of each kernel (layouts in the kernels).
template <int D, int BQ, int BK>
constexpr std::size_t fwd_smem_floats() {
  return static_cast<std::size_t>(D + BK) * (BQ + 4) + static_cast<std::size_t>(BK) * (D + 1);
}
template <int D, int BQ, int BK>
constexpr std::size_t dq_smem_floats() {
  return static_cast<std::size_t>(2 * D + BK) * (BQ + 4) + 2ull * BK * (D + 1);
}
template <int D, int BKV, int BQ>
constexpr std::size_t dkv_smem_floats() {
  return static_cast<std::size_t>(2 * D + BQ) * (BKV + 4) + 2ull * BQ * (D + 1);
}

// ---- forward ------------------------------------------------------------------------------------

// grid (B * NH, ceil(T / BQ)); block kThreads; dynamic shared memory fwd_smem_floats() floats.
// Thread (tx, ty) owns query rows r = ty * RQ + i (i < RQ) of the block and, per key tile, the
// keys c = tx + 16 j (j < CK) of the tile, and output columns d = tx + 16 j (j < CD).
template <int D, int BQ, int BK, int MB>
__global__ void __launch_bounds__(kThreads, MB)
    attention_forward_kernel(const void* __restrict__ qkv, DT qdt, void* __restrict__ out, DT odt,
                             float* __restrict__ lse, int T, int C, int NH, int hs, float scale) {
  constexpr int RQ = BQ / 16, CK = BK / 16, CD = D / 16;
  constexpr int QS = BQ + 4;  // row stride of Qt and Pt (a multiple of 4: aligned vectors)
  constexpr int KS = D + 1;   // row stride of KV (odd: column reads are conflict-free)
  static_assert(BQ % 16 == 0 && BK % 16 == 0 && D % 16 == 0, "tile sizes");
  extern __shared__ float4 smem4[];
  float* Qt = reinterpret_cast<float*>(smem4);  // [D][QS]:  Qt[d][r] = q[q0 + r][d]
  float* Pt = Qt + D * QS;                      // [BK][QS]: Pt[c][r] = P[r][c] of the tile
  float* KV = Pt + BK * QS;                     // [BK][KS]: the tile's keys, then its values

  const int tx = threadIdx.x % kTX, ty = threadIdx.x / kTX;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BQ;  // the longest rows first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;

  load_tile<BQ, D>(Qt, 1, QS, qkv, qdt, qbase, ld, q0, T, hs);  // transposed

  float o[RQ][CD], m[RQ], l[RQ];
#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < CD; ++j) o[i][j] = 0.0f;
  }

  const int kend = min(q0 + BQ, T);  // keys [0, kend) are seen by some row of the block
  const int ntiles = (kend + BK - 1) / BK;
  for (int kt = 0; kt < ntiles; ++kt) {
    const int k0 = kt * BK;
    __syncthreads();  // Qt is written; the previous tile's P V (reads of KV and Pt) is done
    load_tile<BK, D>(KV, KS, 1, qkv, qdt, qbase + C, ld, k0, T, hs);
    __syncthreads();  // K visible

    // s = Q K^T for the thread's RQ x CK scores.
    float s[RQ][CK];
#pragma unroll
    for (int i = 0; i < RQ; ++i)
#pragma unroll
      for (int j = 0; j < CK; ++j) s[i][j] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      float qv[RQ], kv[CK];
      lds<RQ>(Qt + d * QS + ty * RQ, qv);
#pragma unroll
      for (int j = 0; j < CK; ++j) kv[j] = KV[(tx + 16 * j) * KS + d];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
#pragma unroll
        for (int j = 0; j < CK; ++j) s[i][j] = fmaf(qv[i], kv[j], s[i][j]);
    }

    // Online softmax per row: the row's 16 threads combine their maxima and sums by shuffles.
#pragma unroll
    for (int i = 0; i < RQ; ++i) {
      const int q = q0 + ty * RQ + i;
      float tmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        const int k = k0 + tx + 16 * j;
        s[i][j] = k <= q ? s[i][j] * scale : -INFINITY;  // causal mask (k >= T implies k > q
        tmax = fmaxf(tmax, s[i][j]);                     // for every stored row q < T)
      }
      tmax = halfwarp_max(tmax);
      const float mnew = fmaxf(m[i], tmax);  // finite from the first tile on (key 0 <= q)
      const float alpha = m[i] == mnew ? 1.0f : expf(m[i] - mnew);  // m = -inf: 0
      float rsum = 0.0f;
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        const int k = k0 + tx + 16 * j;
        const float p = k <= q ? expf(s[i][j] - mnew) : 0.0f;
        s[i][j] = p;
        rsum += p;
      }
      rsum = halfwarp_sum(rsum);
      l[i] = l[i] * alpha + rsum;
      m[i] = mnew;
#pragma unroll
      for (int j = 0; j < CD; ++j) o[i][j] *= alpha;
    }
    // P to shared memory, transposed: the RQ rows of one key are contiguous.
#pragma unroll
    for (int j = 0; j < CK; ++j) {
      float col[RQ];
#pragma unroll
      for (int i = 0; i < RQ; ++i) col[i] = s[i][j];
      sts<RQ>(Pt + (tx + 16 * j) * QS + ty * RQ, col);
    }
    __syncthreads();  // every read of K is done; P visible
    load_tile<BK, D>(KV, KS, 1, qkv, qdt, qbase + 2LL * C, ld, k0, T, hs);
    __syncthreads();  // V visible

    // O += P V
#pragma unroll 4
    for (int c = 0; c < BK; ++c) {
      float pv[RQ];
      lds<RQ>(Pt + c * QS + ty * RQ, pv);
#pragma unroll
      for (int j = 0; j < CD; ++j) {
        const float v = KV[c * KS + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RQ; ++i) o[i][j] = fmaf(pv[i], v, o[i][j]);
      }
    }
  }

  // out = O / l (as the CPU: the probabilities times 1 / sum); lse = m + log(l).
#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    const int q = q0 + ty * RQ + i;
    if (q >= T) continue;
    const float inv = 1.0f / l[i];
    const std::int64_t obase =
        (static_cast<std::int64_t>(b) * T + q) * C + static_cast<std::int64_t>(h) * hs;
#pragma unroll
    for (int j = 0; j < CD; ++j) {
      const int d = tx + 16 * j;
      if (d < hs) store(out, odt, obase + d, o[i][j] * inv);
    }
    if (tx == 0) lse[static_cast<std::int64_t>(bh) * T + q] = m[i] + logf(l[i]);
  }
}

// ---- backward: D = rowsum(dout * out) -----------------------------------------------------------

// One warp per row n = (b * T + t) * NH + h (memory order; the row's hs elements start at n * hs
// of out and dout); Dws[(b * NH + h) * T + t] = the dot product (lane-strided partial sums, then
// a fixed butterfly).
__global__ void __launch_bounds__(kThreads)
    attention_rowdot_kernel(const void* __restrict__ dout, DT gdt, const void* __restrict__ out,
                            DT odt, float* __restrict__ Dws, std::int64_t rows, int T, int NH,
                            int hs) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warp0 =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (std::int64_t n = warp0; n < rows; n += warps) {  // uniform across the warp
    const std::int64_t e = n * hs;
    float acc = 0.0f;
    for (int d = lane; d < hs; d += 32)
      acc = fmaf(load(dout, gdt, e + d), load(out, odt, e + d), acc);
    acc = warp_sum(acc);
    if (lane == 0) {
      const std::int64_t bt = n / NH, bidx = bt / T;
      const int h = static_cast<int>(n % NH), t = static_cast<int>(bt % T);
      Dws[(bidx * NH + h) * T + t] = acc;
    }
  }
}

// ---- backward: dK and dV ------------------------------------------------------------------------

// grid (B * NH, ceil(T / BKV)); block kThreads; dynamic shared memory dkv_smem_floats() floats.
// Thread (tx, ty) owns keys k = ty * RK + i (i < RK) of the block; per query tile, the queries
// q = tx + 16 j (j < CQ) of the tile; and gradient columns d = tx + 16 j (j < CD).
template <int D, int BKV, int BQ, int MB>
__global__ void __launch_bounds__(kThreads, MB)
    attention_dkdv_kernel(const void* __restrict__ qkv, DT qdt, const void* __restrict__ dout,
                          DT gdt, const float* __restrict__ lse, const float* __restrict__ Dws,
                          void* __restrict__ dqkv, DT ddt, int T, int C, int NH, int hs,
                          float scale) {
  constexpr int RK = BKV / 16, CQ = BQ / 16, CD = D / 16;
  constexpr int KTS = BKV + 4;  // row stride of Kt, Vt, Bf (a multiple of 4: aligned vectors)
  constexpr int QS = D + 1;     // row stride of Qs, dOs (odd: column reads are conflict-free)
  static_assert(BQ % 16 == 0 && BKV % 16 == 0 && D % 16 == 0, "tile sizes");
  extern __shared__ float4 smem4[];
  float* Kt = reinterpret_cast<float*>(smem4);  // [D][KTS]:  Kt[d][k] = key k0 + k, dim d
  float* Vt = Kt + D * KTS;                     // [D][KTS]:  values, the same way
  float* Bf = Vt + D * KTS;                     // [BQ][KTS]: P^T, then dS^T: Bf[q][k]
  float* Qs = Bf + BQ * KTS;                    // [BQ][QS]:  the query tile's q rows
  float* dOs = Qs + BQ * QS;                    // [BQ][QS]:  and its dout rows

  const int tx = threadIdx.x % kTX, ty = threadIdx.x / kTX;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int k0 = blockIdx.y * BKV;  // block 0 has the most query tiles: launched first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;
  const std::int64_t gbase =
      static_cast<std::int64_t>(b) * T * C + static_cast<std::int64_t>(h) * hs;
  const float* lse_h = lse + static_cast<std::int64_t>(bh) * T;
  const float* D_h = Dws + static_cast<std::int64_t>(bh) * T;

  load_tile<BKV, D>(Kt, 1, KTS, qkv, qdt, qbase + C, ld, k0, T, hs);        // transposed
  load_tile<BKV, D>(Vt, 1, KTS, qkv, qdt, qbase + 2LL * C, ld, k0, T, hs);  // transposed

  float dk[RK][CD], dv[RK][CD];
#pragma unroll
  for (int i = 0; i < RK; ++i)
#pragma unroll
    for (int j = 0; j < CD; ++j) dk[i][j] = dv[i][j] = 0.0f;

  const int nqt = (T + BQ - 1) / BQ;
  for (int qt = k0 / BQ; qt < nqt; ++qt) {  // the query tiles that see some key of the block
    const int q0 = qt * BQ;
    __syncthreads();  // Kt, Vt written; the previous tile's dK step (reads of Bf, Qs) is done
    load_tile<BQ, D>(Qs, QS, 1, qkv, qdt, qbase, ld, q0, T, hs);
    load_tile<BQ, D>(dOs, QS, 1, dout, gdt, gbase, C, q0, T, hs);
    float lq[CQ], Dq[CQ];
#pragma unroll
    for (int j = 0; j < CQ; ++j) {
      const int q = q0 + tx + 16 * j;
      lq[j] = q < T ? lse_h[q] : 0.0f;
      Dq[j] = q < T ? D_h[q] : 0.0f;
    }
    __syncthreads();  // Q, dO visible

    // s = K Q^T and dp = V dO^T for the thread's RK x CQ pairs (transposed scores).
    float s[RK][CQ], dp[RK][CQ];
#pragma unroll
    for (int i = 0; i < RK; ++i)
#pragma unroll
      for (int j = 0; j < CQ; ++j) s[i][j] = dp[i][j] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      float kv[RK], vv[RK];
      lds<RK>(Kt + d * KTS + ty * RK, kv);
      lds<RK>(Vt + d * KTS + ty * RK, vv);
#pragma unroll
      for (int j = 0; j < CQ; ++j) {
        const float qv = Qs[(tx + 16 * j) * QS + d];
        const float gv = dOs[(tx + 16 * j) * QS + d];
#pragma unroll
        for (int i = 0; i < RK; ++i) {
          s[i][j] = fmaf(kv[i], qv, s[i][j]);
          dp[i][j] = fmaf(vv[i], gv, dp[i][j]);
        }
      }
    }
    // P = exp(scale s - lse) and dS = P (dP - D) where key <= query < T, else 0.
#pragma unroll
    for (int i = 0; i < RK; ++i) {
      const int k = k0 + ty * RK + i;
#pragma unroll
      for (int j = 0; j < CQ; ++j) {
        const int q = q0 + tx + 16 * j;
        const bool valid = k <= q && q < T;
        const float p = valid ? expf(s[i][j] * scale - lq[j]) : 0.0f;
        s[i][j] = p;
        dp[i][j] = valid ? p * (dp[i][j] - Dq[j]) : 0.0f;
      }
    }
    // dV += P^T dO
#pragma unroll
    for (int j = 0; j < CQ; ++j) {
      float col[RK];
#pragma unroll
      for (int i = 0; i < RK; ++i) col[i] = s[i][j];
      sts<RK>(Bf + (tx + 16 * j) * KTS + ty * RK, col);
    }
    __syncthreads();  // P^T visible
#pragma unroll 4
    for (int q = 0; q < BQ; ++q) {
      float pv[RK];
      lds<RK>(Bf + q * KTS + ty * RK, pv);
#pragma unroll
      for (int j = 0; j < CD; ++j) {
        const float g = dOs[q * QS + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RK; ++i) dv[i][j] = fmaf(pv[i], g, dv[i][j]);
      }
    }
    __syncthreads();  // every read of P^T is done

    // dK += dS^T Q (times scale at the end)
#pragma unroll
    for (int j = 0; j < CQ; ++j) {
      float col[RK];
#pragma unroll
      for (int i = 0; i < RK; ++i) col[i] = dp[i][j];
      sts<RK>(Bf + (tx + 16 * j) * KTS + ty * RK, col);
    }
    __syncthreads();  // dS^T visible
#pragma unroll 4
    for (int q = 0; q < BQ; ++q) {
      float sv[RK];
      lds<RK>(Bf + q * KTS + ty * RK, sv);
#pragma unroll
      for (int j = 0; j < CD; ++j) {
        const float x = Qs[q * QS + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RK; ++i) dk[i][j] = fmaf(sv[i], x, dk[i][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RK; ++i) {
    const int k = k0 + ty * RK + i;
    if (k >= T) continue;
    const std::int64_t e =
        (static_cast<std::int64_t>(b) * T + k) * ld + static_cast<std::int64_t>(h) * hs;
#pragma unroll
    for (int j = 0; j < CD; ++j) {
      const int d = tx + 16 * j;
      if (d >= hs) continue;
      store(dqkv, ddt, e + C + d, dk[i][j] * scale);
      store(dqkv, ddt, e + 2LL * C + d, dv[i][j]);
    }
  }
}

// ---- backward: dQ -------------------------------------------------------------------------------

// grid (B * NH, ceil(T / BQ)); block kThreads; dynamic shared memory dq_smem_floats() floats.
// Thread (tx, ty) owns query rows r = ty * RQ + i (i < RQ); per key tile, the keys c = tx + 16 j
// (j < CK); and gradient columns d = tx + 16 j (j < CD).
template <int D, int BQ, int BK, int MB>
__global__ void __launch_bounds__(kThreads, MB)
    attention_dq_kernel(const void* __restrict__ qkv, DT qdt, const void* __restrict__ dout, DT gdt,
                        const float* __restrict__ lse, const float* __restrict__ Dws,
                        void* __restrict__ dqkv, DT ddt, int T, int C, int NH, int hs,
                        float scale) {
  constexpr int RQ = BQ / 16, CK = BK / 16, CD = D / 16;
  constexpr int QS = BQ + 4;  // row stride of Qt, dOt, dSt (a multiple of 4: aligned vectors)
  constexpr int KS = D + 1;   // row stride of Ks, Vs (odd: column reads are conflict-free)
  static_assert(BQ % 16 == 0 && BK % 16 == 0 && D % 16 == 0, "tile sizes");
  extern __shared__ float4 smem4[];
  float* Qt = reinterpret_cast<float*>(smem4);  // [D][QS]:  Qt[d][r] = q[q0 + r][d]
  float* dOt = Qt + D * QS;                     // [D][QS]:  dout, the same way
  float* dSt = dOt + D * QS;                    // [BK][QS]: dSt[c][r] = dS[r][c] of the tile
  float* Ks = dSt + BK * QS;                    // [BK][KS]: the tile's keys
  float* Vs = Ks + BK * KS;                     // [BK][KS]: and values

  const int tx = threadIdx.x % kTX, ty = threadIdx.x / kTX;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BQ;  // the longest rows first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;
  const std::int64_t gbase =
      static_cast<std::int64_t>(b) * T * C + static_cast<std::int64_t>(h) * hs;

  load_tile<BQ, D>(Qt, 1, QS, qkv, qdt, qbase, ld, q0, T, hs);   // transposed
  load_tile<BQ, D>(dOt, 1, QS, dout, gdt, gbase, C, q0, T, hs);  // transposed
  float lr[RQ], Dr[RQ];
#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    const int q = q0 + ty * RQ + i;
    lr[i] = q < T ? lse[static_cast<std::int64_t>(bh) * T + q] : 0.0f;
    Dr[i] = q < T ? Dws[static_cast<std::int64_t>(bh) * T + q] : 0.0f;
  }

  float acc[RQ][CD];
#pragma unroll
  for (int i = 0; i < RQ; ++i)
#pragma unroll
    for (int j = 0; j < CD; ++j) acc[i][j] = 0.0f;

  const int kend = min(q0 + BQ, T);
  const int ntiles = (kend + BK - 1) / BK;
  for (int kt = 0; kt < ntiles; ++kt) {
    const int k0 = kt * BK;
    __syncthreads();  // Qt, dOt written; the previous tile's dQ step (reads of Ks, dSt) is done
    load_tile<BK, D>(Ks, KS, 1, qkv, qdt, qbase + C, ld, k0, T, hs);
    load_tile<BK, D>(Vs, KS, 1, qkv, qdt, qbase + 2LL * C, ld, k0, T, hs);
    __syncthreads();  // K, V visible

    // s = Q K^T and dp = dO V^T for the thread's RQ x CK pairs.
    float s[RQ][CK], dp[RQ][CK];
#pragma unroll
    for (int i = 0; i < RQ; ++i)
#pragma unroll
      for (int j = 0; j < CK; ++j) s[i][j] = dp[i][j] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      float qv[RQ], gv[RQ];
      lds<RQ>(Qt + d * QS + ty * RQ, qv);
      lds<RQ>(dOt + d * QS + ty * RQ, gv);
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        const float kv = Ks[(tx + 16 * j) * KS + d];
        const float vv = Vs[(tx + 16 * j) * KS + d];
#pragma unroll
        for (int i = 0; i < RQ; ++i) {
          s[i][j] = fmaf(qv[i], kv, s[i][j]);
          dp[i][j] = fmaf(gv[i], vv, dp[i][j]);
        }
      }
    }
    // dS = P (dP - D), P = exp(scale s - lse), where key <= query < T, else 0; to shared
    // memory transposed.
#pragma unroll
    for (int j = 0; j < CK; ++j) {
      const int k = k0 + tx + 16 * j;
      float col[RQ];
#pragma unroll
      for (int i = 0; i < RQ; ++i) {
        const int q = q0 + ty * RQ + i;
        const bool valid = k <= q && q < T;
        const float p = valid ? expf(s[i][j] * scale - lr[i]) : 0.0f;
        col[i] = valid ? p * (dp[i][j] - Dr[i]) : 0.0f;
      }
      sts<RQ>(dSt + (tx + 16 * j) * QS + ty * RQ, col);
    }
    __syncthreads();  // dS visible

    // dQ += dS K (times scale at the end)
#pragma unroll 4
    for (int c = 0; c < BK; ++c) {
      float sv[RQ];
      lds<RQ>(dSt + c * QS + ty * RQ, sv);
#pragma unroll
      for (int j = 0; j < CD; ++j) {
        const float kv = Ks[c * KS + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RQ; ++i) acc[i][j] = fmaf(sv[i], kv, acc[i][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    const int q = q0 + ty * RQ + i;
    if (q >= T) continue;
    const std::int64_t e =
        (static_cast<std::int64_t>(b) * T + q) * ld + static_cast<std::int64_t>(h) * hs;
#pragma unroll
    for (int j = 0; j < CD; ++j) {
      const int d = tx + 16 * j;
      if (d < hs) store(dqkv, ddt, e + d, acc[i][j] * scale);
    }
  }
}

// ---- host side ----------------------------------------------------------------------------------

struct Sizes {
  int B, T, C, NH, hs;
  float scale;
};

// The launch's tile count along y must fit a grid dimension.
bool fits_grid_y(int T, int tile) {
  return (T + tile - 1) / tile <= 65535;
}

template <int D>
cudaError_t forward_d(const void* qkv, DT qdt, void* out, DT odt, float* lse, const Sizes& z,
                      cudaStream_t s) {
  using Cfg = FwdCfg<D>;
  constexpr auto kernel = attention_forward_kernel<D, Cfg::BQ, Cfg::BK, Cfg::MB>;
  constexpr std::size_t bytes = fwd_smem_floats<D, Cfg::BQ, Cfg::BK>() * sizeof(float);
  static_assert(bytes <= kSmemCap, "forward tile too large");
  if (!fits_grid_y(z.T, Cfg::BQ)) return cudaErrorInvalidValue;
  if (const cudaError_t e = allow_smem<kernel>(bytes); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(z.B * z.NH),
                  static_cast<unsigned>((z.T + Cfg::BQ - 1) / Cfg::BQ));
  kernel<<<grid, kThreads, bytes, s>>>(qkv, qdt, out, odt, lse, z.T, z.C, z.NH, z.hs, z.scale);
  return cudaSuccess;
}

template <int D>
cudaError_t backward_d(const void* qkv, DT qdt, const void* dout, DT gdt, const float* lse,
                       const float* Dws, void* dqkv, DT ddt, const Sizes& z, cudaStream_t s) {
  using KCfg = DkvCfg<D>;
  using QCfg = DqCfg<D>;
  constexpr auto kv_kernel = attention_dkdv_kernel<D, KCfg::BKV, KCfg::BQ, KCfg::MB>;
  constexpr auto q_kernel = attention_dq_kernel<D, QCfg::BQ, QCfg::BK, QCfg::MB>;
  constexpr std::size_t kv_bytes = dkv_smem_floats<D, KCfg::BKV, KCfg::BQ>() * sizeof(float);
  constexpr std::size_t q_bytes = dq_smem_floats<D, QCfg::BQ, QCfg::BK>() * sizeof(float);
  static_assert(kv_bytes <= kSmemCap && q_bytes <= kSmemCap, "backward tile too large");
  if (!fits_grid_y(z.T, KCfg::BKV) || !fits_grid_y(z.T, QCfg::BQ)) return cudaErrorInvalidValue;
  if (const cudaError_t e = allow_smem<kv_kernel>(kv_bytes); e != cudaSuccess) return e;
  if (const cudaError_t e = allow_smem<q_kernel>(q_bytes); e != cudaSuccess) return e;
  const unsigned bhs = static_cast<unsigned>(z.B * z.NH);
  const dim3 kv_grid(bhs, static_cast<unsigned>((z.T + KCfg::BKV - 1) / KCfg::BKV));
  kv_kernel<<<kv_grid, kThreads, kv_bytes, s>>>(qkv, qdt, dout, gdt, lse, Dws, dqkv, ddt, z.T, z.C,
                                                z.NH, z.hs, z.scale);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const dim3 q_grid(bhs, static_cast<unsigned>((z.T + QCfg::BQ - 1) / QCfg::BQ));
  q_kernel<<<q_grid, kThreads, q_bytes, s>>>(qkv, qdt, dout, gdt, lse, Dws, dqkv, ddt, z.T, z.C,
                                             z.NH, z.hs, z.scale);
  return cudaSuccess;
}

// Checks the sizes; fills z. False: nothing to launch (*err says whether that is an error).
bool sizes(int B, int T, int C, int NH, Sizes& z, cudaError_t* err) {
  *err = cudaSuccess;
  if (B < 0 || T < 0 || C <= 0 || NH <= 0 || C % NH != 0 || C / NH > kAttentionMaxHeadSize ||
      static_cast<long long>(B) * NH > 0x7fffffffLL) {
    *err = cudaErrorInvalidValue;
    return false;
  }
  if (B == 0 || T == 0) return false;
  z = {B, T, C, NH, C / NH, 1.0f / sqrtf(static_cast<float>(C / NH))};  // as the CPU's scale
  return true;
}

// The tensor-core kernels (attention_mma.cu) take qkv, and for the backward dout, of one 16-bit
// type on a device of compute capability >= 8.0 whose code for them is built for it
// (mma_kernels_loaded); anything else (an f32 operand, mixed 16-bit types, a T4, a build for
// sm_75 alone) runs the FFMA kernels above. The outputs' dtypes do not matter.
bool use_mma(DT qkv_dt, DT dout_dt) {
  if (qkv_dt == DT::f32 || dout_dt != qkv_dt) return false;
  int major = 0;
  return current_device_cc_major(&major) == cudaSuccess && major >= 8 && mma_kernels_loaded();
}

}  // namespace

cudaError_t launch_attention_forward(const void* qkv, DT qkv_dt, void* out, DT out_dt, float* lse,
                                     int B, int T, int C, int NH, cudaStream_t s,
                                     bool rounded) {
  Sizes z{};
  cudaError_t err;
  if (!sizes(B, T, C, NH, z, &err)) return err;
  if (use_mma(qkv_dt, qkv_dt)) {
    MmaArgs a;
    a.qkv = qkv;
    a.qdt = qkv_dt;
    a.out = out;
    a.odt = out_dt;
    a.lse = lse;
    a.B = B, a.T = T, a.C = C, a.NH = NH, a.hs = z.hs, a.scale = z.scale;
    a.rounded = rounded;
    return launch_attention_forward_mma(a, s);
  }
  if (z.hs <= 16) return forward_d<16>(qkv, qkv_dt, out, out_dt, lse, z, s);
  if (z.hs <= 32) return forward_d<32>(qkv, qkv_dt, out, out_dt, lse, z, s);
  if (z.hs <= 64) return forward_d<64>(qkv, qkv_dt, out, out_dt, lse, z, s);
  return forward_d<128>(qkv, qkv_dt, out, out_dt, lse, z, s);
}

cudaError_t launch_attention_backward(const void* qkv, DT qkv_dt, const void* out, DT out_dt,
                                      const float* lse, const void* dout, DT dout_dt, void* dqkv,
                                      DT dqkv_dt, float* Dws, int B, int T, int C, int NH,
                                      cudaStream_t s, bool rounded) {
  Sizes z{};
  cudaError_t err;
  if (!sizes(B, T, C, NH, z, &err)) return err;
  // 1. D = rowsum(dout * out), one warp per (b, t, h) row.
  const std::int64_t rows = static_cast<std::int64_t>(B) * T * NH;
  const std::int64_t warps_per_block = kThreads / 32;
  std::int64_t blocks = (rows + warps_per_block - 1) / warps_per_block;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;  // the kernel strides over the rest
  attention_rowdot_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
      dout, dout_dt, out, out_dt, Dws, rows, T, NH, z.hs);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  // 2. dK, dV and 3. dQ.
  if (use_mma(qkv_dt, dout_dt)) {
    MmaArgs a;
    a.qkv = qkv;
    a.qdt = qkv_dt;
    a.dout = dout;
    a.lse_in = lse;
    a.Dws = Dws;
    a.dqkv = dqkv;
    a.ddt = dqkv_dt;
    a.B = B, a.T = T, a.C = C, a.NH = NH, a.hs = z.hs, a.scale = z.scale;
    a.rounded = rounded;
    return launch_attention_backward_mma(a, s);
  }
  if (z.hs <= 16) return backward_d<16>(qkv, qkv_dt, dout, dout_dt, lse, Dws, dqkv, dqkv_dt, z, s);
  if (z.hs <= 32) return backward_d<32>(qkv, qkv_dt, dout, dout_dt, lse, Dws, dqkv, dqkv_dt, z, s);
  if (z.hs <= 64) return backward_d<64>(qkv, qkv_dt, dout, dout_dt, lse, Dws, dqkv, dqkv_dt, z, s);
  return backward_d<128>(qkv, qkv_dt, dout, dout_dt, lse, Dws, dqkv, dqkv_dt, z, s);
}

}  // namespace strata::cuda_ops
