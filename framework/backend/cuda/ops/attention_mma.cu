// Causal attention on tensor cores: the forward, dK/dV and dQ kernels of attention.cu for qkv (and
// dout) of one 16-bit type, bf16 or f16, on compute capability >= 8.0 (attention.cu dispatches;
// f32 operands and older GPUs keep its FFMA kernels). Same algorithm, same outputs, same
// determinism: one block per (batch, head, tile of 64 rows), key/query tiles walked in increasing
// order, every output element produced by one thread in a fixed order, no atomics.
//
// Blocks of 128 threads = 4 warps; warp w owns rows 16w .. 16w + 15 of the block's 64 rows and
// computes with mma.sync m16n8k16 (mma.cuh: the fragment layouts; lane (g, t) holds rows g and
// g + 8 of every 16 x 8 accumulator, columns 2t and 2t + 1). Tiles sit in shared memory as 16-bit
// row-major copies of their rows, zero-padded to the head size D in {16, 32, 64, 128} and to the
// rows past T, row stride D + 8 halves (16-byte multiples whose eight rows of an 8 x 8 matrix fall
// in different banks). Fragments come from them by ldmatrix (smem_copy.cuh), .trans where a tile's
// rows are the product's k (V in P V, dO and Q in dK/dV's products, K in dQ's), so no tile is
// stored twice. Tiles stream in by cp.async into two stages: the next tile's copies are in flight
// while the block computes on this one (the dQ kernel at head size 128 has room for one stage).
//
// Accuracy. Q K^T and dO V^T multiply the 16-bit inputs exactly (f32 accumulation). P (the
// probabilities) and dS are f32 values: each is split into hi = round16(x) and lo = round16(x - hi)
// and multiplied twice (hi, then lo), so the product sees x to about 2^-16 relative (bf16: 8 + 8
// bits) or 2^-22 (f16: 11 + 11 bits) instead of a 16-bit rounding. f16's range needs scaling: P in
// [0, 1] is multiplied by 2^14 (kPScaleF16; lo then stays normal down to P ~ 2^-17 and the
// scale is undone exactly at the end), dS row by row by a power of two that brings the row's
// largest |dS| of the tile into [2^14, 2^15) (each tile's product for those rows is summed in a
// fresh accumulator, then multiplied back exactly and added). bf16 has f32's range: no scaling.
//
// Rounded (RND, strata.allow_rounded_attention): P and dS enter their products as hi alone, the
// 16-bit rounding of x (after the same scaling), as FlashAttention does: half the mmas of those
// products (a forward has 2 of its 3 units of tensor-core work in P V with the split, 1 of 2
// rounded; dK/dV 6 -> 4; dQ 4 -> 3), at about 2^-9 (bf16) or 2^-12 (f16) relative error in
// each P or dS. Everything else (the softmax, the sums, the orders) is the split form's.
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "framework/backend/cuda/ops/attention_mma.hpp"
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/mma.cuh"
#include "framework/backend/cuda/ops/smem_copy.cuh"

namespace strata::cuda_ops {
namespace {

// 4 warps. __launch_bounds__'s minimum of 1 block per SM leaves ptxas every register up to 255:
// without it ptxas aimed at 3 to 5 blocks per SM and spilled registers in some of the instances
// (-Xptxas -v). With it, on sm_90 (nvcc 13.0): dQ 157-255 registers, dK/dV 199-255; dK/dV spills
// 20-32 bytes at head size 64 and 12-96 at 128, dQ 8-12 at 128 (the first version, with plain
// shared loads and one stage, used 248 there and spilled nothing). The forward up to head size 64
// asks for 3 blocks per SM (12 warps instead of 8 to hide the latency of its dependent mmas,
// ldmatrix and exponentials; shared memory 46 KB a block): 168 registers, 20 bytes spilled by the
// bf16 split form at head size 64 and none by the others (at 1 block: 181-183, 2 blocks per SM);
// at 128, 211-220 registers, 2 blocks per SM.
constexpr int kMmaThreads = 128;
template <int D>
constexpr int kFwdMinBlocks = D <= 64 ? 3 : 1;
constexpr int kRows = 64;                       // rows of a block: 16 per warp
constexpr std::size_t kMmaSmemCap = 99 * 1024;  // the smallest opt-in limit of cc >= 8.0 (8.6, 8.9)

// How a block copies tile rows to shared memory: 16-byte cp.async copies (kLoad16: hs, C multiples
// of 8 and qkv/dout 16-byte aligned), 8-byte loads through registers (kLoad8: multiples of 4, 8-byte
// aligned), or element by element (kLoad1). Chosen by the launcher (load_mode).
constexpr int kLoad1 = 0, kLoad8 = 1, kLoad16 = 2;

// The kernels' helpers exist where the kernels have bodies (STRATA_MMA_KERNELS, mma.cuh): an
// sm_75 device pass leaves them unused, and nvcc 12 warns of each unused one (#177-D).
#if defined(STRATA_MMA_KERNELS)
constexpr float kPScaleF16 = 16384.0f;  // 2^14
constexpr float kPUnscaleF16 = 1.0f / 16384.0f;

template <Mma16 TY>
constexpr float p_scale() {
  return TY == Mma16::f16 ? kPScaleF16 : 1.0f;
}
template <Mma16 TY>
constexpr float p_unscale() {
  return TY == Mma16::f16 ? kPUnscaleF16 : 1.0f;
}

// The A fragment of k-chunk kc of the f32 accumulators x (row g scaled by sc0, row g + 8 by sc1):
// split into hi + lo parts of TY, or (RND) rounded to TY once into hi (lo untouched).
template <Mma16 TY, bool RND, int N>
__device__ __forceinline__ void split_a(const float (&x)[N][4], int kc, float sc0, float sc1,
                                        std::uint32_t (&hi)[4], std::uint32_t (&lo)[4]) {
  if constexpr (RND) {
    hi[0] = pack2<TY>(x[2 * kc][0] * sc0, x[2 * kc][1] * sc0);
    hi[1] = pack2<TY>(x[2 * kc][2] * sc1, x[2 * kc][3] * sc1);
    hi[2] = pack2<TY>(x[2 * kc + 1][0] * sc0, x[2 * kc + 1][1] * sc0);
    hi[3] = pack2<TY>(x[2 * kc + 1][2] * sc1, x[2 * kc + 1][3] * sc1);
  } else {
    split2<TY>(x[2 * kc][0] * sc0, x[2 * kc][1] * sc0, hi[0], lo[0]);
    split2<TY>(x[2 * kc][2] * sc1, x[2 * kc][3] * sc1, hi[1], lo[1]);
    split2<TY>(x[2 * kc + 1][0] * sc0, x[2 * kc + 1][1] * sc0, hi[2], lo[2]);
    split2<TY>(x[2 * kc + 1][2] * sc1, x[2 * kc + 1][3] * sc1, hi[3], lo[3]);
  }
}

// Max and sum over the four lanes of a quad (the lanes holding one accumulator row).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Exponentials in base 2: a score enters as s scale log2(e) and exp2f raises 2 to it (one
// multiply, or an fma with the row's offset, and ex2, instead of expf's range reduction); the
// log-sum-exp written and read stays in natural-log units (lse = m ln 2 + log l).
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// One key tile of the forward's online softmax for the lane's two rows: the tile's scores s
// (Q K^T) become P = 2^(s scale2 - m), m[i] the running maximum of row i's scores times scale2
// (= scale log2 e), l[i] the running sum of its P; alpha[i] is the factor the row's O must be
// rescaled by. MASK: the tile reaches past some row's query (the diagonal tile, which also holds
// any keys >= T): keys k > q give P = 0. Other tiles skip the mask's index arithmetic.
template <int NK, bool MASK>
__device__ __forceinline__ void softmax_tile(float (&s)[NK][4], float (&m)[2], float (&l)[2],
                                             float (&alpha)[2], int k0, int t,
                                             const int (&qr)[2], float scale2) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float tmax = -INFINITY;
#pragma unroll
    for (int j = 0; j < NK; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool keep = !MASK || k0 + j * 8 + 2 * t + e <= qr[i];  // causal mask
        const float v = keep ? s[j][2 * i + e] * scale2 : -INFINITY;
        s[j][2 * i + e] = v;
        tmax = fmaxf(tmax, v);
      }
    tmax = quad_max(tmax);
    const float mnew = fmaxf(m[i], tmax);  // finite from the first tile on (key 0 <= q)
    alpha[i] = m[i] == mnew ? 1.0f : exp2f(m[i] - mnew);
    float rsum = 0.0f;
#pragma unroll
    for (int j = 0; j < NK; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = exp2f(s[j][2 * i + e] - mnew);  // 2^-inf = 0: the masked keys
        s[j][2 * i + e] = p;
        rsum += p;
      }
    l[i] = l[i] * alpha[i] + quad_sum(rsum);
    m[i] = mnew;
  }
}

// f16 only: the power of two sc that brings a row's largest |x| (mx) into [2^14, 2^15), and 1/sc
// (both exact; the exponent clamped to +-100). mx == 0: 1.
__device__ __forceinline__ void row_scale(float mx, float& sc, float& inv) {
  const int e = static_cast<int>((f32_bits(mx) >> 23) & 0xffu);  // biased exponent
  int k = mx > 0.0f ? 141 - e : 0;                               // 2^(14 - (e - 127))
  k = k > 100 ? 100 : (k < -100 ? -100 : k);
  sc = bits_f32(static_cast<std::uint32_t>(k + 127) << 23);
  inv = bits_f32(static_cast<std::uint32_t>(127 - k) << 23);
}

// Rows [t0, t0 + ROWS) of one head's slice of a 16-bit row-major tensor to shared memory, row-major
// with row stride D + 8: element (r, d) of source row t = t0 + r is x[base + t * ld + d]; rows
// t >= T and columns d >= hs are zeros. kLoad16 queues cp.async copies (the caller commits them
// and waits before its barrier); the other modes store at once.
template <int ROWS, int D>
__device__ __forceinline__ void load_rows(std::uint16_t* dst, const std::uint16_t* x,
                                          std::int64_t base, std::int64_t ld, int t0, int T, int hs,
                                          int mode) {
  constexpr int SD = D + 8;
  if (mode == kLoad16) {
    for (int idx = threadIdx.x; idx < ROWS * D / 8; idx += kMmaThreads) {
      const int r = idx / (D / 8), d = (idx % (D / 8)) * 8;
      const int t = t0 + r;
      const bool valid = t < T && d < hs;
      cp_async16(dst + r * SD + d, valid ? x + base + static_cast<std::int64_t>(t) * ld + d : x,
                 valid);
    }
    return;
  }
  if (mode == kLoad8) {
    for (int idx = threadIdx.x; idx < ROWS * D / 4; idx += kMmaThreads) {
      const int r = idx / (D / 4), d = (idx % (D / 4)) * 4;
      const int t = t0 + r;
      uint2 v = make_uint2(0u, 0u);
      if (t < T && d < hs)
        v = *reinterpret_cast<const uint2*>(x + base + static_cast<std::int64_t>(t) * ld + d);
      *reinterpret_cast<uint2*>(dst + r * SD + d) = v;  // 8-byte aligned: SD and d multiples of 4
    }
    return;
  }
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kMmaThreads) {
    const int r = idx / D, d = idx % D;
    const int t = t0 + r;
    std::uint16_t v = 0;
    if (t < T && d < hs) v = x[base + static_cast<std::int64_t>(t) * ld + d];
    dst[r * SD + d] = v;
  }
}

// Key tile [k0, k0 + BK) of one head into a stage: its K rows, then its V rows (row stride D + 8).
template <int BK, int D>
__device__ __forceinline__ void load_kv(std::uint16_t* stage, const std::uint16_t* qkv,
                                        std::int64_t qbase, int C, int k0, int T, int hs,
                                        int mode) {
  load_rows<BK, D>(stage, qkv, qbase + C, 3LL * C, k0, T, hs, mode);
  load_rows<BK, D>(stage + BK * (D + 8), qkv, qbase + 2LL * C, 3LL * C, k0, T, hs, mode);
}

// Waits for this thread's copies of the tile about to be computed: with a next tile's copies
// just queued behind them (ahead), one group may stay in flight.
__device__ __forceinline__ void wait_tile(bool ahead) {
  if (ahead)
    cp_async_wait<1>();
  else
    cp_async_wait<0>();
}

// ---- the products the kernels share -------------------------------------------------------------
// Fragments by ldmatrix from tiles of row stride D + 8. Each accumulator's mmas run in a fixed
// order (k ascending; hi before lo), so how the products are grouped does not change a bit.

// acc[j] += A B^T for the warp's rows r0 .. r0 + 15 of the row-major tile A and the N rows of the
// n-major tile B (acc[j]: B's rows 8j .. 8j + 7), summed over D columns.
template <int D, int N, Mma16 TY>
__device__ __forceinline__ void mma_abt(float (&acc)[N / 8][4], const std::uint16_t* A,
                                        const std::uint16_t* B, int r0) {
  constexpr int SD = D + 8;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    std::uint32_t a[4];
    ld_frag_a(a, A, SD, r0, kc * 16);
#pragma unroll
    for (int j = 0; j < N / 8; j += 2) {
      std::uint32_t b0[2], b1[2];
      ld_frag_b_nk(b0, b1, B, SD, j * 8, kc * 16);
      mma_16816<TY>(acc[j], a, b0);
      mma_16816<TY>(acc[j + 1], a, b1);
    }
  }
}

// acc[j] += X B: X the f32 accumulators x (the warp's 16 rows x K, the layout of C) times sc, split
// into hi + lo parts of TY (RND: rounded to TY once; P: probabilities); B the K rows of a k-major
// tile (D columns).
template <int D, int K, Mma16 TY, bool RND>
__device__ __forceinline__ void mma_split_b(float (&acc)[D / 8][4], const float (&x)[K / 8][4],
                                            float sc, const std::uint16_t* B) {
  constexpr int SD = D + 8;
#pragma unroll
  for (int kc = 0; kc < K / 16; ++kc) {
    std::uint32_t ph[4], pl[4];
    split_a<TY, RND>(x, kc, sc, sc, ph, pl);
#pragma unroll
    for (int j = 0; j < D / 8; j += 2) {
      std::uint32_t b0[2], b1[2];
      ld_frag_b_kn(b0, b1, B, SD, kc * 16, j * 8);
      mma_16816<TY>(acc[j], ph, b0);
      if constexpr (!RND) mma_16816<TY>(acc[j], pl, b0);
      mma_16816<TY>(acc[j + 1], ph, b1);
      if constexpr (!RND) mma_16816<TY>(acc[j + 1], pl, b1);
    }
  }
}

// acc[j] += dS B: dS the f32 accumulators ds (16 rows x K) split into hi + lo parts of TY (RND:
// rounded once); f16 scales each row by the power of two that brings its largest |dS| (dmax, over
// the row's lanes) into f16's range, sums the tile's product in a fresh accumulator and multiplies
// it back (exact).
template <int D, int K, Mma16 TY, bool RND>
__device__ __forceinline__ void mma_ds_b(float (&acc)[D / 8][4], const float (&ds)[K / 8][4],
                                         const float (&dmax)[2], const std::uint16_t* B) {
  constexpr int SD = D + 8;
  float sc[2] = {1.0f, 1.0f}, inv[2] = {1.0f, 1.0f};
  if constexpr (TY == Mma16::f16) {
#pragma unroll
    for (int i = 0; i < 2; ++i) row_scale(quad_max(dmax[i]), sc[i], inv[i]);
  }
  std::uint32_t dh[K / 16][4], dl[K / 16][4];
#pragma unroll
  for (int kc = 0; kc < K / 16; ++kc) split_a<TY, RND>(ds, kc, sc[0], sc[1], dh[kc], dl[kc]);
#pragma unroll
  for (int j = 0; j < D / 8; j += 2) {
    float t0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, t1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int kc = 0; kc < K / 16; ++kc) {
      std::uint32_t b0[2], b1[2];
      ld_frag_b_kn(b0, b1, B, SD, kc * 16, j * 8);
      mma_16816<TY>(t0, dh[kc], b0);
      if constexpr (!RND) mma_16816<TY>(t0, dl[kc], b0);
      mma_16816<TY>(t1, dh[kc], b1);
      if constexpr (!RND) mma_16816<TY>(t1, dl[kc], b1);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[j][e] = fmaf(t0[e], inv[e >> 1], acc[j][e]);
      acc[j + 1][e] = fmaf(t1[e], inv[e >> 1], acc[j + 1][e]);
    }
  }
}
#endif  // STRATA_MMA_KERNELS

// ---- forward ------------------------------------------------------------------------------------

// grid (B * NH, ceil(T / 64)); block 128; dynamic shared memory fwd_mma_smem<D, BK>() bytes: Q, and
// two stages of K and V (the next tile's copies run while the block computes on this one).
template <int D, int BK>
constexpr std::size_t fwd_mma_smem() {
  return static_cast<std::size_t>(kRows + 4 * BK) * (D + 8) * 2;
}

template <int D, int BK, Mma16 TY, bool RND>
__global__ void __launch_bounds__(kMmaThreads, kFwdMinBlocks<D>)
    attention_forward_mma_kernel(const std::uint16_t* __restrict__ qkv, void* __restrict__ out,
                                 DT odt, float* __restrict__ lse, int T, int C, int NH, int hs,
                                 float scale, int mode) {
#if defined(STRATA_MMA_KERNELS)
  constexpr int SD = D + 8, ND = D / 8, NK = BK / 8;
  extern __shared__ float4 smem4[];
  std::uint16_t* Qs = reinterpret_cast<std::uint16_t*>(smem4);  // [64][SD]
  std::uint16_t* KV = Qs + kRows * SD;  // stage s: K [BK][SD] at KV + 2s BK SD, then V [BK][SD]

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // the longest rows first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;
  const int qr[2] = {q0 + r0 + g, q0 + r0 + g + 8};  // the lane's two query rows

  const int kend = min(q0 + kRows, T);
  const int ntiles = (kend + BK - 1) / BK;
  const float scale2 = scale * kLog2e;
  load_rows<kRows, D>(Qs, qkv, qbase, ld, q0, T, hs, mode);
  load_kv<BK, D>(KV, qkv, qbase, C, 0, T, hs, mode);
  cp_async_commit();

  float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < ND; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  for (int kt = 0; kt < ntiles; ++kt) {
    const int k0 = kt * BK;
    const bool ahead = kt + 1 < ntiles;
    if (ahead) {  // into the other stage, last read in iteration kt - 1 (before its barrier)
      load_kv<BK, D>(KV + ((kt + 1) & 1) * 2 * BK * SD, qkv, qbase, C, k0 + BK, T, hs, mode);
      cp_async_commit();
    }
    wait_tile(ahead);
    __syncthreads();  // this tile's K and V (and, first, Q) are in shared memory
    const std::uint16_t* Ks = KV + (kt & 1) * 2 * BK * SD;
    const std::uint16_t* Vs = Ks + BK * SD;

    // S = Q K^T for the warp's 16 rows and the tile's BK keys.
    float s[NK][4];
#pragma unroll
    for (int j = 0; j < NK; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    mma_abt<D, BK, TY>(s, Qs, Ks, r0);

    // Online softmax of the lane's two rows (each row's four lanes combine by shuffles); only
    // the last tile (keys up to q0 + 63, and any past T) needs the causal mask.
    float alpha[2];
    if (k0 + BK - 1 > q0)
      softmax_tile<NK, true>(s, m, l, alpha, k0, t, qr, scale2);
    else
      softmax_tile<NK, false>(s, m, l, alpha, k0, t, qr, scale2);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < ND; ++j) {
        o[j][2 * i] *= alpha[i];
        o[j][2 * i + 1] *= alpha[i];
      }

    // O += P V, P split into hi + lo (times 2^14 for f16); V's rows are the product's k.
    mma_split_b<D, BK, TY, RND>(o, s, p_scale<TY>(), Vs);
    __syncthreads();  // this stage's reads are done before the next iteration refills it
  }

  // out = O / l (times 2^-14 for f16, exact); lse = m ln 2 + log(l) (m in base 2).
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = qr[i];
    if (q >= T) continue;
    const float inv = 1.0f / l[i];
    const std::int64_t obase =
        (static_cast<std::int64_t>(b) * T + q) * C + static_cast<std::int64_t>(h) * hs;
#pragma unroll
    for (int j = 0; j < ND; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = j * 8 + 2 * t + e;
        if (d < hs) store(out, odt, obase + d, o[j][2 * i + e] * p_unscale<TY>() * inv);
      }
    if (t == 0) lse[static_cast<std::int64_t>(bh) * T + q] = fmaf(m[i], kLn2, logf(l[i]));
  }
#else
  __trap();
#endif
}

// ---- backward: dK and dV ------------------------------------------------------------------------

// Two stages of the query tile (Q, dO, and their lse and D) behind the block's K and V.
template <int D, int BQ>
constexpr std::size_t dkdv_mma_smem() {
  return 4ull * BQ * sizeof(float) +
         static_cast<std::size_t>(2 * kRows + 4 * BQ) * (D + 8) * 2;
}

// grid (B * NH, ceil(T / 64)); block 128. Warp w owns keys k0 + 16w ..; per query tile of BQ
// queries: S^T = K Q^T, dP^T = V dO^T (rows: keys), P^T and dS^T, then dV += P^T dO and
// dK += dS^T Q (Q's and dO's rows are those products' k).
template <int D, int BQ, Mma16 TY, bool RND>
__global__ void __launch_bounds__(kMmaThreads, 1)
    attention_dkdv_mma_kernel(const std::uint16_t* __restrict__ qkv,
                              const std::uint16_t* __restrict__ dout, const float* __restrict__ lse,
                              const float* __restrict__ Dws, void* __restrict__ dqkv, DT ddt, int T,
                              int C, int NH, int hs, float scale, int mode) {
#if defined(STRATA_MMA_KERNELS)
  constexpr int SD = D + 8, ND = D / 8, NQ = BQ / 8;
  extern __shared__ float4 smem4[];
  float* LD = reinterpret_cast<float*>(smem4);  // stage s: lse [BQ] at LD + 2s BQ, then D [BQ]
  std::uint16_t* Ks = reinterpret_cast<std::uint16_t*>(LD + 4 * BQ);  // [64][SD]
  std::uint16_t* Vs = Ks + kRows * SD;                                // [64][SD]
  std::uint16_t* QG = Vs + kRows * SD;  // stage s: Q [BQ][SD] at QG + 2s BQ SD, then dO [BQ][SD]

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int k0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // the most query tiles first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;
  const std::int64_t gbase =
      static_cast<std::int64_t>(b) * T * C + static_cast<std::int64_t>(h) * hs;
  const float* lse_h = lse + static_cast<std::int64_t>(bh) * T;
  const float* D_h = Dws + static_cast<std::int64_t>(bh) * T;
  const int kr[2] = {k0 + r0 + g, k0 + r0 + g + 8};  // the lane's two keys
  const float scale2 = scale * kLog2e;

  // The query tile qt into stage st: Q and dO by load_rows, lse and D by plain stores.
  auto load_q = [&](int qt, int st) {
    const int q0 = qt * BQ;
    std::uint16_t* qs = QG + st * 2 * BQ * SD;
    load_rows<BQ, D>(qs, qkv, qbase, ld, q0, T, hs, mode);
    load_rows<BQ, D>(qs + BQ * SD, dout, gbase, C, q0, T, hs, mode);
    float* l = LD + st * 2 * BQ;
    for (int i = threadIdx.x; i < BQ; i += kMmaThreads) {
      const int q = q0 + i;
      l[i] = q < T ? lse_h[q] * kLog2e : 0.0f;  // base 2, as the scores below
      l[BQ + i] = q < T ? D_h[q] : 0.0f;
    }
  };

  const int qt0 = k0 / BQ, nqt = (T + BQ - 1) / BQ;  // the query tiles that see some key here
  load_kv<kRows, D>(Ks, qkv, qbase, C, k0, T, hs, mode);  // Vs follows Ks
  load_q(qt0, 0);
  cp_async_commit();

  float dk[ND][4], dv[ND][4];
#pragma unroll
  for (int j = 0; j < ND; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.0f;

  for (int qt = qt0; qt < nqt; ++qt) {
    const int q0 = qt * BQ, st = (qt - qt0) & 1;
    const bool ahead = qt + 1 < nqt;
    if (ahead) {  // into the other stage, last read in the previous iteration (before its barrier)
      load_q(qt + 1, st ^ 1);
      cp_async_commit();
    }
    wait_tile(ahead);
    __syncthreads();  // this tile (and, first, K and V) in shared memory
    const std::uint16_t* Qs = QG + st * 2 * BQ * SD;
    const std::uint16_t* dOs = Qs + BQ * SD;
    const float* Ls = LD + st * 2 * BQ;
    const float* Ds = Ls + BQ;

    float s[NQ][4], dp[NQ][4];
#pragma unroll
    for (int j = 0; j < NQ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.0f;
    mma_abt<D, BQ, TY>(s, Ks, Qs, r0);
    mma_abt<D, BQ, TY>(dp, Vs, dOs, r0);
    // P = exp(scale s - lse) and dS = P (dP - D) where key <= query < T, else 0. The mask only
    // where the tile holds a query before one of the block's keys, or past T.
    float dmax[2] = {0.0f, 0.0f};
    auto p_ds = [&](auto mask) {
#pragma unroll
      for (int j = 0; j < NQ; ++j)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int c = j * 8 + 2 * t + e, q = q0 + c;
            const bool valid = !decltype(mask)::value || (kr[i] <= q && q < T);
            const float p = valid ? exp2f(fmaf(s[j][2 * i + e], scale2, -Ls[c])) : 0.0f;
            const float ds = valid ? p * (dp[j][2 * i + e] - Ds[c]) : 0.0f;
            s[j][2 * i + e] = p;
            dp[j][2 * i + e] = ds;
            dmax[i] = fmaxf(dmax[i], fabsf(ds));
          }
    };
    if (q0 < k0 + kRows - 1 || q0 + BQ > T)
      p_ds(std::true_type{});
    else
      p_ds(std::false_type{});

    // dV += P^T dO (P split, times 2^14 for f16).
    mma_split_b<D, BQ, TY, RND>(dv, s, p_scale<TY>(), dOs);

    // dK += dS^T Q: dS split (f16: each key row scaled by a power of two, undone per tile).
    mma_ds_b<D, BQ, TY, RND>(dk, dp, dmax, Qs);
    __syncthreads();  // this stage's reads are done before the next iteration refills it
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int k = kr[i];
    if (k >= T) continue;
    const std::int64_t e0 =
        (static_cast<std::int64_t>(b) * T + k) * ld + static_cast<std::int64_t>(h) * hs;
#pragma unroll
    for (int j = 0; j < ND; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = j * 8 + 2 * t + e;
        if (d >= hs) continue;
        store(dqkv, ddt, e0 + C + d, dk[j][2 * i + e] * scale);
        store(dqkv, ddt, e0 + 2LL * C + d, dv[j][2 * i + e] * p_unscale<TY>());
      }
  }
#else
  __trap();
#endif
}

// ---- backward: dQ -------------------------------------------------------------------------------

// Q and dO, then STAGES stages of the key tile (K and V): two where they fit in kMmaSmemCap, one
// at head size 128 (the next tile's copies then start after the block computed this one).
template <int D, int BK>
constexpr int dq_stages() {
  return static_cast<std::size_t>(2 * kRows + 4 * BK) * (D + 8) * 2 <= kMmaSmemCap ? 2 : 1;
}
template <int D, int BK>
constexpr std::size_t dq_mma_smem() {
  return static_cast<std::size_t>(2 * kRows + 2 * dq_stages<D, BK>() * BK) * (D + 8) * 2;
}

// grid (B * NH, ceil(T / 64)); block 128. Warp w owns queries q0 + 16w ..; per key tile of BK
// keys: S = Q K^T, dP = dO V^T, dS, then dQ += dS K (K's rows are that product's k).
template <int D, int BK, Mma16 TY, bool RND>
__global__ void __launch_bounds__(kMmaThreads, 1)
    attention_dq_mma_kernel(const std::uint16_t* __restrict__ qkv,
                            const std::uint16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ Dws, void* __restrict__ dqkv, DT ddt, int T,
                            int C, int NH, int hs, float scale, int mode) {
#if defined(STRATA_MMA_KERNELS)
  constexpr int SD = D + 8, ND = D / 8, NK = BK / 8, STAGES = dq_stages<D, BK>();
  extern __shared__ float4 smem4[];
  std::uint16_t* Qs = reinterpret_cast<std::uint16_t*>(smem4);  // [64][SD]
  std::uint16_t* dOs = Qs + kRows * SD;                         // [64][SD]
  std::uint16_t* KV = dOs + kRows * SD;  // stage s: K [BK][SD] at KV + 2s BK SD, then V [BK][SD]

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // the longest rows first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;
  const std::int64_t gbase =
      static_cast<std::int64_t>(b) * T * C + static_cast<std::int64_t>(h) * hs;
  const int qr[2] = {q0 + r0 + g, q0 + r0 + g + 8};
  const float scale2 = scale * kLog2e;

  const int kend = min(q0 + kRows, T);
  const int ntiles = (kend + BK - 1) / BK;
  load_rows<kRows, D>(Qs, qkv, qbase, ld, q0, T, hs, mode);
  load_rows<kRows, D>(dOs, dout, gbase, C, q0, T, hs, mode);
  load_kv<BK, D>(KV, qkv, qbase, C, 0, T, hs, mode);
  cp_async_commit();
  float lr[2], Dr[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    lr[i] = qr[i] < T ? lse[static_cast<std::int64_t>(bh) * T + qr[i]] * kLog2e : 0.0f;  // base 2
    Dr[i] = qr[i] < T ? Dws[static_cast<std::int64_t>(bh) * T + qr[i]] : 0.0f;
  }

  float acc[ND][4];
#pragma unroll
  for (int j = 0; j < ND; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  for (int kt = 0; kt < ntiles; ++kt) {
    const int k0 = kt * BK;
    const bool ahead = STAGES == 2 && kt + 1 < ntiles;
    if (ahead) {  // into the other stage, last read in iteration kt - 1 (before its barrier)
      load_kv<BK, D>(KV + ((kt + 1) & 1) * 2 * BK * SD, qkv, qbase, C, k0 + BK, T, hs, mode);
      cp_async_commit();
    }
    wait_tile(ahead);
    __syncthreads();  // this tile's K and V (and, first, Q and dO) in shared memory
    const std::uint16_t* Ks = KV + (STAGES == 2 ? (kt & 1) : 0) * 2 * BK * SD;
    const std::uint16_t* Vs = Ks + BK * SD;

    float s[NK][4], dp[NK][4];
#pragma unroll
    for (int j = 0; j < NK; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.0f;
    mma_abt<D, BK, TY>(s, Qs, Ks, r0);
    mma_abt<D, BK, TY>(dp, dOs, Vs, r0);
    // dS = P (dP - D), P = exp(scale s - lse), where key <= query < T, else 0. The mask only on
    // the last tile (keys up to q0 + 63, and any past T); rows past T have zero Q and dO, and
    // lse and D 0, so their dS is 0 unmasked too.
    float dmax[2] = {0.0f, 0.0f};
    auto ds_of = [&](auto mask) {
#pragma unroll
      for (int j = 0; j < NK; ++j)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = k0 + j * 8 + 2 * t + e, q = qr[i];
            const bool valid = !decltype(mask)::value || (k <= q && q < T);
            const float p = valid ? exp2f(fmaf(s[j][2 * i + e], scale2, -lr[i])) : 0.0f;
            const float ds = valid ? p * (dp[j][2 * i + e] - Dr[i]) : 0.0f;
            dp[j][2 * i + e] = ds;
            dmax[i] = fmaxf(dmax[i], fabsf(ds));
          }
    };
    if (k0 + BK - 1 > q0)
      ds_of(std::true_type{});
    else
      ds_of(std::false_type{});

    // dQ += dS K (times scale at the end); f16: rows scaled as in the dK/dV kernel.
    mma_ds_b<D, BK, TY, RND>(acc, dp, dmax, Ks);
    __syncthreads();  // this stage's reads are done before it is refilled
    if (STAGES == 1 && kt + 1 < ntiles) {
      load_kv<BK, D>(KV, qkv, qbase, C, k0 + BK, T, hs, mode);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = qr[i];
    if (q >= T) continue;
    const std::int64_t e0 =
        (static_cast<std::int64_t>(b) * T + q) * ld + static_cast<std::int64_t>(h) * hs;
#pragma unroll
    for (int j = 0; j < ND; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = j * 8 + 2 * t + e;
        if (d < hs) store(dqkv, ddt, e0 + d, acc[j][2 * i + e] * scale);
      }
  }
#else
  __trap();
#endif
}

// ---- host side ----------------------------------------------------------------------------------

// Key tile of the forward and dQ kernels, query tile of the dK/dV kernel.
template <int D>
struct MmaCfg {
  static constexpr int FWD_BK = 64, DQ_BK = 64, DKV_BQ = D == 128 ? 16 : 64;
};

// load_rows's mode for rows of a tensor at p of row length a multiple of C (C, 3C).
int load_mode(const void* p, int C, int hs) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (hs % 8 == 0 && C % 8 == 0 && a % 16 == 0) return kLoad16;
  if (hs % 4 == 0 && C % 4 == 0 && a % 8 == 0) return kLoad8;
  return kLoad1;
}

template <int D, Mma16 TY, bool RND>
cudaError_t forward_mma_d(const MmaArgs& z, cudaStream_t s) {
  constexpr int BK = MmaCfg<D>::FWD_BK;
  constexpr auto kernel = attention_forward_mma_kernel<D, BK, TY, RND>;
  constexpr std::size_t bytes = fwd_mma_smem<D, BK>();
  static_assert(bytes <= kMmaSmemCap, "forward tile too large");
  if (const cudaError_t e = allow_smem<kernel>(bytes); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(z.B * z.NH),
                  static_cast<unsigned>((z.T + kRows - 1) / kRows));
  kernel<<<grid, kMmaThreads, bytes, s>>>(static_cast<const std::uint16_t*>(z.qkv), z.out, z.odt,
                                          z.lse, z.T, z.C, z.NH, z.hs, z.scale,
                                          load_mode(z.qkv, z.C, z.hs));
  return cudaSuccess;
}

template <int D, Mma16 TY, bool RND>
cudaError_t backward_mma_d(const MmaArgs& z, cudaStream_t s) {
  constexpr int BQ = MmaCfg<D>::DKV_BQ, BK = MmaCfg<D>::DQ_BK;
  constexpr auto kv_kernel = attention_dkdv_mma_kernel<D, BQ, TY, RND>;
  constexpr auto q_kernel = attention_dq_mma_kernel<D, BK, TY, RND>;
  constexpr std::size_t kv_bytes = dkdv_mma_smem<D, BQ>(), q_bytes = dq_mma_smem<D, BK>();
  static_assert(kv_bytes <= kMmaSmemCap && q_bytes <= kMmaSmemCap, "backward tile too large");
  if (const cudaError_t e = allow_smem<kv_kernel>(kv_bytes); e != cudaSuccess) return e;
  if (const cudaError_t e = allow_smem<q_kernel>(q_bytes); e != cudaSuccess) return e;
  const int mode = std::min(load_mode(z.qkv, z.C, z.hs), load_mode(z.dout, z.C, z.hs));
  const dim3 grid(static_cast<unsigned>(z.B * z.NH),
                  static_cast<unsigned>((z.T + kRows - 1) / kRows));
  const auto* qkv = static_cast<const std::uint16_t*>(z.qkv);
  const auto* dout = static_cast<const std::uint16_t*>(z.dout);
  kv_kernel<<<grid, kMmaThreads, kv_bytes, s>>>(qkv, dout, z.lse_in, z.Dws, z.dqkv, z.ddt, z.T, z.C,
                                                z.NH, z.hs, z.scale, mode);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  q_kernel<<<grid, kMmaThreads, q_bytes, s>>>(qkv, dout, z.lse_in, z.Dws, z.dqkv, z.ddt, z.T, z.C,
                                              z.NH, z.hs, z.scale, mode);
  return cudaSuccess;
}

template <Mma16 TY, bool RND>
cudaError_t forward_mma_r(const MmaArgs& z, cudaStream_t s) {
  if (z.hs <= 16) return forward_mma_d<16, TY, RND>(z, s);
  if (z.hs <= 32) return forward_mma_d<32, TY, RND>(z, s);
  if (z.hs <= 64) return forward_mma_d<64, TY, RND>(z, s);
  return forward_mma_d<128, TY, RND>(z, s);
}
template <Mma16 TY, bool RND>
cudaError_t backward_mma_r(const MmaArgs& z, cudaStream_t s) {
  if (z.hs <= 16) return backward_mma_d<16, TY, RND>(z, s);
  if (z.hs <= 32) return backward_mma_d<32, TY, RND>(z, s);
  if (z.hs <= 64) return backward_mma_d<64, TY, RND>(z, s);
  return backward_mma_d<128, TY, RND>(z, s);
}
template <Mma16 TY>
cudaError_t forward_mma_t(const MmaArgs& z, cudaStream_t s) {
  return z.rounded ? forward_mma_r<TY, true>(z, s) : forward_mma_r<TY, false>(z, s);
}
template <Mma16 TY>
cudaError_t backward_mma_t(const MmaArgs& z, cudaStream_t s) {
  return z.rounded ? backward_mma_r<TY, true>(z, s) : backward_mma_r<TY, false>(z, s);
}

}  // namespace

bool mma_kernels_loaded() {
  // Every kernel of this file comes from the same compiler passes: one instance stands for all.
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, attention_forward_mma_kernel<64, MmaCfg<64>::FWD_BK,
                                                                Mma16::bf16, false>) != cudaSuccess) {
    cudaGetLastError();  // (no code for this device: not a sticky error)
    return false;
  }
  return attr.ptxVersion >= 80;
}

cudaError_t launch_attention_forward_mma(const MmaArgs& z, cudaStream_t s) {
  if ((z.T + kRows - 1) / kRows > 65535) return cudaErrorInvalidValue;
  return z.qdt == DT::bf16 ? forward_mma_t<Mma16::bf16>(z, s) : forward_mma_t<Mma16::f16>(z, s);
}

cudaError_t launch_attention_backward_mma(const MmaArgs& z, cudaStream_t s) {
  if ((z.T + kRows - 1) / kRows > 65535) return cudaErrorInvalidValue;
  return z.qdt == DT::bf16 ? backward_mma_t<Mma16::bf16>(z, s) : backward_mma_t<Mma16::f16>(z, s);
}

}  // namespace strata::cuda_ops
