// Causal attention on tensor cores: the forward, dK/dV and dQ kernels of attention.cu for qkv (and
// dout) of one 16-bit type, bf16 or f16, on compute capability >= 8.0 (attention.cu dispatches;
// f32 operands and older GPUs keep its FFMA kernels). Same algorithm, same outputs, same
// determinism: one block per (batch, head, tile of 64 rows), key/query tiles walked in increasing
// order, every output element produced by one thread in a fixed order, no atomics.
//
// Blocks of 128 threads = 4 warps; warp w owns rows 16w .. 16w + 15 of the block's 64 rows and
// computes with mma.sync m16n8k16 (mma.cuh: the fragment layouts; lane (g, t) holds rows g and
// g + 8 of every 16 x 8 accumulator, columns 2t and 2t + 1). Tiles sit in shared memory as 16-bit
// values, zero-padded to the head size D in {16, 32, 64, 128} and to the rows past T; an operand
// read along its other dimension has a transposed copy (the B operand of a product must have its
// k index contiguous; load_tile16_t writes it as 32-bit words of two rows). Row strides are D + 8
// or cols + 8 halves: 16-byte multiples whose eight rows of a fragment load fall in different
// banks. Operands come from shared memory by plain 32-bit loads (no cp.async or ldmatrix, which
// the CUDA emulator cannot run), and a block loads its next tile only after computing the last.
//
// Accuracy. Q K^T and dO V^T multiply the 16-bit inputs exactly (f32 accumulation). P (the
// probabilities) and dS are f32 values: each is split into hi = round16(x) and lo = round16(x - hi)
// and multiplied twice (hi, then lo), so the product sees x to about 2^-16 relative (bf16: 8 + 8
// bits) or 2^-22 (f16: 11 + 11 bits) instead of a 16-bit rounding. f16's range needs scaling: P in
// [0, 1] is multiplied by 2^14 (kPScaleF16; lo then stays normal down to P ~ 2^-17 and the
// scale is undone exactly at the end), dS row by row by a power of two that brings the row's
// largest |dS| of the tile into [2^14, 2^15) (each tile's product for those rows is summed in a
// fresh accumulator, then multiplied back exactly and added). bf16 has f32's range: no scaling.
#include <cstddef>

#include "framework/backend/cuda/ops/attention_mma.hpp"
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/mma.cuh"

namespace strata::cuda_ops {
namespace {

// 4 warps. __launch_bounds__'s minimum of 1 block per SM leaves ptxas every register up to 255:
// without it ptxas aimed at 3 to 5 blocks per SM and spilled a few registers in some of the
// instances (-Xptxas -v); with it none spills on sm_90, and on sm_80 only the f16 dK/dV kernel of
// head size 128 (255 registers; 8 bytes).
constexpr int kMmaThreads = 128;
constexpr int kRows = 64;                       // rows of a block: 16 per warp
constexpr std::size_t kMmaSmemCap = 99 * 1024;  // the smallest opt-in limit of cc >= 8.0 (8.6, 8.9)
constexpr float kPScaleF16 = 16384.0f;          // 2^14
constexpr float kPUnscaleF16 = 1.0f / 16384.0f;

template <Mma16 TY>
constexpr float p_scale() {
  return TY == Mma16::f16 ? kPScaleF16 : 1.0f;
}
template <Mma16 TY>
constexpr float p_unscale() {
  return TY == Mma16::f16 ? kPUnscaleF16 : 1.0f;
}

__device__ __forceinline__ std::uint32_t ld32(const std::uint16_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

// Rows [t0, t0 + ROWS) of one head's slice of a 16-bit row-major tensor to shared memory: element
// (r, d) goes to dst[r * rs + d * ds] (ds = 1: row-major; rs = 1: transposed). Source row t starts
// at element base + t * ld; rows t >= T and columns d >= hs are zeros. Four columns per step when
// vec (hs, ld and base multiples of 4 and x 8-byte aligned: checked by the launcher).
template <int ROWS, int D>
__device__ __forceinline__ void load_tile16(std::uint16_t* dst, int rs, int ds,
                                            const std::uint16_t* x, std::int64_t base,
                                            std::int64_t ld, int t0, int T, int hs, bool vec) {
  if (vec) {
    for (int idx = threadIdx.x; idx < ROWS * D / 4; idx += kMmaThreads) {
      const int r = idx / (D / 4), d = (idx % (D / 4)) * 4;
      const int t = t0 + r;
      uint2 v = make_uint2(0u, 0u);
      if (t < T && d < hs)
        v = *reinterpret_cast<const uint2*>(x + base + static_cast<std::int64_t>(t) * ld + d);
      std::uint16_t* o = dst + r * rs + d * ds;
      if (ds == 1) {  // 8-byte aligned: rs and the tiles' offsets are multiples of 8 halves
        *reinterpret_cast<uint2*>(o) = v;
        continue;
      }
      o[0] = static_cast<std::uint16_t>(v.x & 0xffffu);
      o[ds] = static_cast<std::uint16_t>(v.x >> 16);
      o[2 * ds] = static_cast<std::uint16_t>(v.y & 0xffffu);
      o[3 * ds] = static_cast<std::uint16_t>(v.y >> 16);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kMmaThreads) {
    const int r = idx / D, d = idx % D;
    const int t = t0 + r;
    std::uint16_t v = 0;
    if (t < T && d < hs) v = x[base + static_cast<std::int64_t>(t) * ld + d];
    dst[r * rs + d * ds] = v;
  }
}

// The same tile transposed: element (r, d) to dst[d * st + r] (st even). With vec, each thread
// takes two rows r, r + 1 (r even) and four columns and stores four 32-bit words (the two rows'
// elements of one column); consecutive threads take consecutive row pairs, so a warp's stores hit
// distinct banks (or two per bank when ROWS < 64), where one thread per column would collide
// many ways. Else element by element.
template <int ROWS, int D>
__device__ __forceinline__ void load_tile16_t(std::uint16_t* dst, int st, const std::uint16_t* x,
                                              std::int64_t base, std::int64_t ld, int t0, int T,
                                              int hs, bool vec) {
  if (!vec) {
    load_tile16<ROWS, D>(dst, 1, st, x, base, ld, t0, T, hs, false);
    return;
  }
  constexpr int RP = ROWS / 2;
  static_assert(ROWS % 2 == 0, "row pairs");
  for (int u = threadIdx.x; u < RP * (D / 4); u += kMmaThreads) {
    const int r = 2 * (u % RP), d = 4 * (u / RP);
    uint2 v0 = make_uint2(0u, 0u), v1 = make_uint2(0u, 0u);
    const std::int64_t row = base + static_cast<std::int64_t>(t0 + r) * ld + d;
    if (d < hs) {
      if (t0 + r < T) v0 = *reinterpret_cast<const uint2*>(x + row);
      if (t0 + r + 1 < T) v1 = *reinterpret_cast<const uint2*>(x + row + ld);
    }
    std::uint32_t* o = reinterpret_cast<std::uint32_t*>(dst + d * st + r);
    const int w = st / 2;  // words per row of dst
    o[0] = (v0.x & 0xffffu) | (v1.x << 16);
    o[w] = (v0.x >> 16) | (v1.x & 0xffff0000u);
    o[2 * w] = (v0.y & 0xffffu) | (v1.y << 16);
    o[3 * w] = (v0.y >> 16) | (v1.y & 0xffff0000u);
  }
}

// The A fragment (16 x 16) of rows r0.., columns c0.. of a row-major 16-bit tile of stride st.
__device__ __forceinline__ void frag_a(std::uint32_t (&a)[4], const std::uint16_t* s, int st,
                                       int r0, int c0, int g, int t) {
  const std::uint16_t* p = s + (r0 + g) * st + c0 + 2 * t;
  a[0] = ld32(p);
  a[1] = ld32(p + 8 * st);
  a[2] = ld32(p + 8);
  a[3] = ld32(p + 8 * st + 8);
}
// The B fragment (16 x 8, k x n) of a tile stored n-major ([n][k], stride st): n0.., k0...
__device__ __forceinline__ void frag_b(std::uint32_t (&b)[2], const std::uint16_t* s, int st,
                                       int n0, int k0, int g, int t) {
  const std::uint16_t* p = s + (n0 + g) * st + k0 + 2 * t;
  b[0] = ld32(p);
  b[1] = ld32(p + 8);
}

// hi and lo A fragments of keys/queries 16 kc .. 16 kc + 15 from the f32 accumulators x (the
// layout of C: x[2 kc] holds columns 16 kc + 2t, +1, x[2 kc + 1] those + 8), times sc[row].
template <Mma16 TY, int N>
__device__ __forceinline__ void split_a(const float (&x)[N][4], int kc, float sc0, float sc1,
                                        std::uint32_t (&hi)[4], std::uint32_t (&lo)[4]) {
  split2<TY>(x[2 * kc][0] * sc0, x[2 * kc][1] * sc0, hi[0], lo[0]);
  split2<TY>(x[2 * kc][2] * sc1, x[2 * kc][3] * sc1, hi[1], lo[1]);
  split2<TY>(x[2 * kc + 1][0] * sc0, x[2 * kc + 1][1] * sc0, hi[2], lo[2]);
  split2<TY>(x[2 * kc + 1][2] * sc1, x[2 * kc + 1][3] * sc1, hi[3], lo[3]);
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

// f16 only: the power of two sc that brings a row's largest |x| (mx) into [2^14, 2^15), and 1/sc
// (both exact; the exponent clamped to +-100). mx == 0: 1.
__device__ __forceinline__ void row_scale(float mx, float& sc, float& inv) {
  const int e = static_cast<int>((f32_bits(mx) >> 23) & 0xffu);  // biased exponent
  int k = mx > 0.0f ? 141 - e : 0;                               // 2^(14 - (e - 127))
  k = k > 100 ? 100 : (k < -100 ? -100 : k);
  sc = bits_f32(static_cast<std::uint32_t>(k + 127) << 23);
  inv = bits_f32(static_cast<std::uint32_t>(127 - k) << 23);
}

// ---- forward ------------------------------------------------------------------------------------

// grid (B * NH, ceil(T / 64)); block 128; dynamic shared memory fwd_mma_smem<D, BK>() bytes.
template <int D, int BK>
constexpr std::size_t fwd_mma_smem() {
  return (static_cast<std::size_t>(kRows + BK) * (D + 8) + static_cast<std::size_t>(D) * (BK + 8)) *
         2;
}

template <int D, int BK, Mma16 TY>
__global__ void __launch_bounds__(kMmaThreads, 1)
    attention_forward_mma_kernel(const std::uint16_t* __restrict__ qkv, void* __restrict__ out,
                                 DT odt, float* __restrict__ lse, int T, int C, int NH, int hs,
                                 float scale, bool vec) {
#if defined(STRATA_MMA_KERNELS)
  constexpr int SD = D + 8, SK = BK + 8, ND = D / 8, NK = BK / 8;
  extern __shared__ float4 smem4[];
  std::uint16_t* Qs = reinterpret_cast<std::uint16_t*>(smem4);  // [64][SD]
  std::uint16_t* Ks = Qs + kRows * SD;                          // [BK][SD]
  std::uint16_t* Vt = Ks + BK * SD;                             // [D][SK]: Vt[d][c] = v[k0 + c][d]

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // the longest rows first
  const std::int64_t ld = 3LL * C;
  const std::int64_t qbase =
      static_cast<std::int64_t>(b) * T * ld + static_cast<std::int64_t>(h) * hs;
  const int qr[2] = {q0 + r0 + g, q0 + r0 + g + 8};  // the lane's two query rows

  load_tile16<kRows, D>(Qs, SD, 1, qkv, qbase, ld, q0, T, hs, vec);

  float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < ND; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  const int kend = min(q0 + kRows, T);
  const int ntiles = (kend + BK - 1) / BK;
  for (int kt = 0; kt < ntiles; ++kt) {
    const int k0 = kt * BK;
    __syncthreads();  // Q written; the previous tile's reads of Ks and Vt are done
    load_tile16<BK, D>(Ks, SD, 1, qkv, qbase + C, ld, k0, T, hs, vec);
    load_tile16_t<BK, D>(Vt, SK, qkv, qbase + 2LL * C, ld, k0, T, hs, vec);
    __syncthreads();

    // S = Q K^T for the warp's 16 rows and the tile's BK keys.
    float s[NK][4];
#pragma unroll
    for (int j = 0; j < NK; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      std::uint32_t a[4];
      frag_a(a, Qs, SD, r0, kc * 16, g, t);
#pragma unroll
      for (int j = 0; j < NK; ++j) {
        std::uint32_t bb[2];
        frag_b(bb, Ks, SD, j * 8, kc * 16, g, t);
        mma_16816<TY>(s[j], a, bb);
      }
    }

    // Online softmax of the lane's two rows (each row's four lanes combine by shuffles).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int q = qr[i];
      float tmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < NK; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = k0 + j * 8 + 2 * t + e;
          const float v = k <= q ? s[j][2 * i + e] * scale : -INFINITY;  // causal mask
          s[j][2 * i + e] = v;
          tmax = fmaxf(tmax, v);
        }
      tmax = quad_max(tmax);
      const float mnew = fmaxf(m[i], tmax);  // finite from the first tile on (key 0 <= q)
      const float alpha = m[i] == mnew ? 1.0f : expf(m[i] - mnew);
      float rsum = 0.0f;
#pragma unroll
      for (int j = 0; j < NK; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = k0 + j * 8 + 2 * t + e;
          const float p = k <= q ? expf(s[j][2 * i + e] - mnew) : 0.0f;
          s[j][2 * i + e] = p;
          rsum += p;
        }
      rsum = quad_sum(rsum);
      l[i] = l[i] * alpha + rsum;
      m[i] = mnew;
#pragma unroll
      for (int j = 0; j < ND; ++j) {
        o[j][2 * i] *= alpha;
        o[j][2 * i + 1] *= alpha;
      }
    }

    // O += P V, P split into hi + lo (times 2^14 for f16).
#pragma unroll
    for (int kc = 0; kc < BK / 16; ++kc) {
      std::uint32_t ph[4], pl[4];
      split_a<TY>(s, kc, p_scale<TY>(), p_scale<TY>(), ph, pl);
#pragma unroll
      for (int j = 0; j < ND; ++j) {
        std::uint32_t bb[2];
        frag_b(bb, Vt, SK, j * 8, kc * 16, g, t);
        mma_16816<TY>(o[j], ph, bb);
        mma_16816<TY>(o[j], pl, bb);
      }
    }
  }

  // out = O / l (times 2^-14 for f16, exact); lse = m + log(l).
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
    if (t == 0) lse[static_cast<std::int64_t>(bh) * T + q] = m[i] + logf(l[i]);
  }
#else
  __trap();
#endif
}

// ---- backward: dK and dV ------------------------------------------------------------------------

template <int D, int BQ>
constexpr std::size_t dkdv_mma_smem() {
  return (static_cast<std::size_t>(2 * kRows + 2 * BQ) * (D + 8) +
          2ull * D * static_cast<std::size_t>(BQ + 8)) *
             2 +
         2ull * BQ * sizeof(float);
}

// grid (B * NH, ceil(T / 64)); block 128. Warp w owns keys k0 + 16w ..; per query tile of BQ
// queries: S^T = K Q^T, dP^T = V dO^T (rows: keys), P^T and dS^T, then dV += P^T dO and
// dK += dS^T Q.
template <int D, int BQ, Mma16 TY>
__global__ void __launch_bounds__(kMmaThreads, 1)
    attention_dkdv_mma_kernel(const std::uint16_t* __restrict__ qkv,
                              const std::uint16_t* __restrict__ dout, const float* __restrict__ lse,
                              const float* __restrict__ Dws, void* __restrict__ dqkv, DT ddt, int T,
                              int C, int NH, int hs, float scale, bool vec) {
#if defined(STRATA_MMA_KERNELS)
  constexpr int SD = D + 8, SQ = BQ + 8, ND = D / 8, NQ = BQ / 8;
  extern __shared__ float4 smem4[];
  float* Ls = reinterpret_cast<float*>(smem4);                    // [BQ]: lse of the tile's queries
  float* Ds = Ls + BQ;                                            // [BQ]: D of them
  std::uint16_t* Ks = reinterpret_cast<std::uint16_t*>(Ds + BQ);  // [64][SD]
  std::uint16_t* Vs = Ks + kRows * SD;                            // [64][SD]
  std::uint16_t* Qs = Vs + kRows * SD;                            // [BQ][SD]
  std::uint16_t* dOs = Qs + BQ * SD;                              // [BQ][SD]
  std::uint16_t* Qt = dOs + BQ * SD;                              // [D][SQ]
  std::uint16_t* dOt = Qt + D * SQ;                               // [D][SQ]

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

  load_tile16<kRows, D>(Ks, SD, 1, qkv, qbase + C, ld, k0, T, hs, vec);
  load_tile16<kRows, D>(Vs, SD, 1, qkv, qbase + 2LL * C, ld, k0, T, hs, vec);

  float dk[ND][4], dv[ND][4];
#pragma unroll
  for (int j = 0; j < ND; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.0f;

  const int nqt = (T + BQ - 1) / BQ;
  for (int qt = k0 / BQ; qt < nqt; ++qt) {  // the query tiles that see some key of the block
    const int q0 = qt * BQ;
    __syncthreads();  // K, V written; the previous tile's reads are done
    load_tile16<BQ, D>(Qs, SD, 1, qkv, qbase, ld, q0, T, hs, vec);
    load_tile16<BQ, D>(dOs, SD, 1, dout, gbase, C, q0, T, hs, vec);
    load_tile16_t<BQ, D>(Qt, SQ, qkv, qbase, ld, q0, T, hs, vec);
    load_tile16_t<BQ, D>(dOt, SQ, dout, gbase, C, q0, T, hs, vec);
    for (int i = threadIdx.x; i < BQ; i += kMmaThreads) {
      const int q = q0 + i;
      Ls[i] = q < T ? lse_h[q] : 0.0f;
      Ds[i] = q < T ? D_h[q] : 0.0f;
    }
    __syncthreads();

    float s[NQ][4], dp[NQ][4];
#pragma unroll
    for (int j = 0; j < NQ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      std::uint32_t ak[4], av[4];
      frag_a(ak, Ks, SD, r0, kc * 16, g, t);
      frag_a(av, Vs, SD, r0, kc * 16, g, t);
#pragma unroll
      for (int j = 0; j < NQ; ++j) {
        std::uint32_t bq[2], bg[2];
        frag_b(bq, Qs, SD, j * 8, kc * 16, g, t);
        frag_b(bg, dOs, SD, j * 8, kc * 16, g, t);
        mma_16816<TY>(s[j], ak, bq);
        mma_16816<TY>(dp[j], av, bg);
      }
    }
    // P = exp(scale s - lse) and dS = P (dP - D) where key <= query < T, else 0.
    float dmax[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < NQ; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = j * 8 + 2 * t + e, q = q0 + c;
          const bool valid = kr[i] <= q && q < T;
          const float p = valid ? expf(s[j][2 * i + e] * scale - Ls[c]) : 0.0f;
          const float ds = valid ? p * (dp[j][2 * i + e] - Ds[c]) : 0.0f;
          s[j][2 * i + e] = p;
          dp[j][2 * i + e] = ds;
          dmax[i] = fmaxf(dmax[i], fabsf(ds));
        }

        // dV += P^T dO (P split, times 2^14 for f16).
#pragma unroll
    for (int kc = 0; kc < BQ / 16; ++kc) {
      std::uint32_t ph[4], pl[4];
      split_a<TY>(s, kc, p_scale<TY>(), p_scale<TY>(), ph, pl);
#pragma unroll
      for (int j = 0; j < ND; ++j) {
        std::uint32_t bb[2];
        frag_b(bb, dOt, SQ, j * 8, kc * 16, g, t);
        mma_16816<TY>(dv[j], ph, bb);
        mma_16816<TY>(dv[j], pl, bb);
      }
    }

    // dK += dS^T Q: dS split (f16: each key row scaled by a power of two, undone per tile).
    float sc[2] = {1.0f, 1.0f}, inv[2] = {1.0f, 1.0f};
    if constexpr (TY == Mma16::f16) {
#pragma unroll
      for (int i = 0; i < 2; ++i) row_scale(quad_max(dmax[i]), sc[i], inv[i]);
    }
    std::uint32_t dh[BQ / 16][4], dl[BQ / 16][4];
#pragma unroll
    for (int kc = 0; kc < BQ / 16; ++kc) split_a<TY>(dp, kc, sc[0], sc[1], dh[kc], dl[kc]);
#pragma unroll
    for (int j = 0; j < ND; ++j) {
      float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kc = 0; kc < BQ / 16; ++kc) {
        std::uint32_t bb[2];
        frag_b(bb, Qt, SQ, j * 8, kc * 16, g, t);
        mma_16816<TY>(tmp, dh[kc], bb);
        mma_16816<TY>(tmp, dl[kc], bb);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[j][e] = fmaf(tmp[e], inv[e >> 1], dk[j][e]);
    }
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

template <int D, int BK>
constexpr std::size_t dq_mma_smem() {
  return (static_cast<std::size_t>(2 * kRows + 2 * BK) * (D + 8) +
          static_cast<std::size_t>(D) * (BK + 8)) *
         2;
}

// grid (B * NH, ceil(T / 64)); block 128. Warp w owns queries q0 + 16w ..; per key tile of BK
// keys: S = Q K^T, dP = dO V^T, dS, then dQ += dS K.
template <int D, int BK, Mma16 TY>
__global__ void __launch_bounds__(kMmaThreads, 1)
    attention_dq_mma_kernel(const std::uint16_t* __restrict__ qkv,
                            const std::uint16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ Dws, void* __restrict__ dqkv, DT ddt, int T,
                            int C, int NH, int hs, float scale, bool vec) {
#if defined(STRATA_MMA_KERNELS)
  constexpr int SD = D + 8, SK = BK + 8, ND = D / 8, NK = BK / 8;
  extern __shared__ float4 smem4[];
  std::uint16_t* Qs = reinterpret_cast<std::uint16_t*>(smem4);  // [64][SD]
  std::uint16_t* dOs = Qs + kRows * SD;                         // [64][SD]
  std::uint16_t* Ks = dOs + kRows * SD;                         // [BK][SD]
  std::uint16_t* Vs = Ks + BK * SD;                             // [BK][SD]
  std::uint16_t* Kt = Vs + BK * SD;                             // [D][SK]

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

  load_tile16<kRows, D>(Qs, SD, 1, qkv, qbase, ld, q0, T, hs, vec);
  load_tile16<kRows, D>(dOs, SD, 1, dout, gbase, C, q0, T, hs, vec);
  float lr[2], Dr[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    lr[i] = qr[i] < T ? lse[static_cast<std::int64_t>(bh) * T + qr[i]] : 0.0f;
    Dr[i] = qr[i] < T ? Dws[static_cast<std::int64_t>(bh) * T + qr[i]] : 0.0f;
  }

  float acc[ND][4];
#pragma unroll
  for (int j = 0; j < ND; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  const int kend = min(q0 + kRows, T);
  const int ntiles = (kend + BK - 1) / BK;
  for (int kt = 0; kt < ntiles; ++kt) {
    const int k0 = kt * BK;
    __syncthreads();  // Q, dO written; the previous tile's reads are done
    load_tile16<BK, D>(Ks, SD, 1, qkv, qbase + C, ld, k0, T, hs, vec);
    load_tile16<BK, D>(Vs, SD, 1, qkv, qbase + 2LL * C, ld, k0, T, hs, vec);
    load_tile16_t<BK, D>(Kt, SK, qkv, qbase + C, ld, k0, T, hs, vec);
    __syncthreads();

    float s[NK][4], dp[NK][4];
#pragma unroll
    for (int j = 0; j < NK; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      std::uint32_t aq[4], ag[4];
      frag_a(aq, Qs, SD, r0, kc * 16, g, t);
      frag_a(ag, dOs, SD, r0, kc * 16, g, t);
#pragma unroll
      for (int j = 0; j < NK; ++j) {
        std::uint32_t bk[2], bv[2];
        frag_b(bk, Ks, SD, j * 8, kc * 16, g, t);
        frag_b(bv, Vs, SD, j * 8, kc * 16, g, t);
        mma_16816<TY>(s[j], aq, bk);
        mma_16816<TY>(dp[j], ag, bv);
      }
    }
    // dS = P (dP - D), P = exp(scale s - lse), where key <= query < T, else 0.
    float dmax[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < NK; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = k0 + j * 8 + 2 * t + e, q = qr[i];
          const bool valid = k <= q && q < T;
          const float p = valid ? expf(s[j][2 * i + e] * scale - lr[i]) : 0.0f;
          const float ds = valid ? p * (dp[j][2 * i + e] - Dr[i]) : 0.0f;
          dp[j][2 * i + e] = ds;
          dmax[i] = fmaxf(dmax[i], fabsf(ds));
        }

    // dQ += dS K (times scale at the end); f16: rows scaled as in the dK/dV kernel.
    float sc[2] = {1.0f, 1.0f}, inv[2] = {1.0f, 1.0f};
    if constexpr (TY == Mma16::f16) {
#pragma unroll
      for (int i = 0; i < 2; ++i) row_scale(quad_max(dmax[i]), sc[i], inv[i]);
    }
    std::uint32_t dh[BK / 16][4], dl[BK / 16][4];
#pragma unroll
    for (int kc = 0; kc < BK / 16; ++kc) split_a<TY>(dp, kc, sc[0], sc[1], dh[kc], dl[kc]);
#pragma unroll
    for (int j = 0; j < ND; ++j) {
      float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kc = 0; kc < BK / 16; ++kc) {
        std::uint32_t bb[2];
        frag_b(bb, Kt, SK, j * 8, kc * 16, g, t);
        mma_16816<TY>(tmp, dh[kc], bb);
        mma_16816<TY>(tmp, dl[kc], bb);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = fmaf(tmp[e], inv[e >> 1], acc[j][e]);
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

bool vec_ok(const void* p, int C, int hs) {
  return hs % 4 == 0 && C % 4 == 0 && reinterpret_cast<std::uintptr_t>(p) % 8 == 0;
}

template <int D, Mma16 TY>
cudaError_t forward_mma_d(const MmaArgs& z, cudaStream_t s) {
  constexpr int BK = MmaCfg<D>::FWD_BK;
  constexpr auto kernel = attention_forward_mma_kernel<D, BK, TY>;
  constexpr std::size_t bytes = fwd_mma_smem<D, BK>();
  static_assert(bytes <= kMmaSmemCap, "forward tile too large");
  if (const cudaError_t e = allow_smem<kernel>(bytes); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(z.B * z.NH),
                  static_cast<unsigned>((z.T + kRows - 1) / kRows));
  kernel<<<grid, kMmaThreads, bytes, s>>>(static_cast<const std::uint16_t*>(z.qkv), z.out, z.odt,
                                          z.lse, z.T, z.C, z.NH, z.hs, z.scale,
                                          vec_ok(z.qkv, z.C, z.hs));
  return cudaSuccess;
}

template <int D, Mma16 TY>
cudaError_t backward_mma_d(const MmaArgs& z, cudaStream_t s) {
  constexpr int BQ = MmaCfg<D>::DKV_BQ, BK = MmaCfg<D>::DQ_BK;
  constexpr auto kv_kernel = attention_dkdv_mma_kernel<D, BQ, TY>;
  constexpr auto q_kernel = attention_dq_mma_kernel<D, BK, TY>;
  constexpr std::size_t kv_bytes = dkdv_mma_smem<D, BQ>(), q_bytes = dq_mma_smem<D, BK>();
  static_assert(kv_bytes <= kMmaSmemCap && q_bytes <= kMmaSmemCap, "backward tile too large");
  if (const cudaError_t e = allow_smem<kv_kernel>(kv_bytes); e != cudaSuccess) return e;
  if (const cudaError_t e = allow_smem<q_kernel>(q_bytes); e != cudaSuccess) return e;
  const bool vec = vec_ok(z.qkv, z.C, z.hs) && vec_ok(z.dout, z.C, z.hs);
  const dim3 grid(static_cast<unsigned>(z.B * z.NH),
                  static_cast<unsigned>((z.T + kRows - 1) / kRows));
  const auto* qkv = static_cast<const std::uint16_t*>(z.qkv);
  const auto* dout = static_cast<const std::uint16_t*>(z.dout);
  kv_kernel<<<grid, kMmaThreads, kv_bytes, s>>>(qkv, dout, z.lse_in, z.Dws, z.dqkv, z.ddt, z.T, z.C,
                                                z.NH, z.hs, z.scale, vec);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  q_kernel<<<grid, kMmaThreads, q_bytes, s>>>(qkv, dout, z.lse_in, z.Dws, z.dqkv, z.ddt, z.T, z.C,
                                              z.NH, z.hs, z.scale, vec);
  return cudaSuccess;
}

template <Mma16 TY>
cudaError_t forward_mma_t(const MmaArgs& z, cudaStream_t s) {
  if (z.hs <= 16) return forward_mma_d<16, TY>(z, s);
  if (z.hs <= 32) return forward_mma_d<32, TY>(z, s);
  if (z.hs <= 64) return forward_mma_d<64, TY>(z, s);
  return forward_mma_d<128, TY>(z, s);
}
template <Mma16 TY>
cudaError_t backward_mma_t(const MmaArgs& z, cudaStream_t s) {
  if (z.hs <= 16) return backward_mma_d<16, TY>(z, s);
  if (z.hs <= 32) return backward_mma_d<32, TY>(z, s);
  if (z.hs <= 64) return backward_mma_d<64, TY>(z, s);
  return backward_mma_d<128, TY>(z, s);
}

}  // namespace

cudaError_t launch_attention_forward_mma(const MmaArgs& z, cudaStream_t s) {
  if ((z.T + kRows - 1) / kRows > 65535) return cudaErrorInvalidValue;
  return z.qdt == DT::bf16 ? forward_mma_t<Mma16::bf16>(z, s) : forward_mma_t<Mma16::f16>(z, s);
}

cudaError_t launch_attention_backward_mma(const MmaArgs& z, cudaStream_t s) {
  if ((z.T + kRows - 1) / kRows > 65535) return cudaErrorInvalidValue;
  return z.qdt == DT::bf16 ? backward_mma_t<Mma16::bf16>(z, s) : backward_mma_t<Mma16::f16>(z, s);
}

}  // namespace strata::cuda_ops
