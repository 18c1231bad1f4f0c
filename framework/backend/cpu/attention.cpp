// Causal multi-head attention, memory-efficient: forward keeps only lse[B,NH,T]; backward
// recomputes the probabilities block by block. Per (batch, head) and block of 64 query rows, the
// scores against the causal prefix of keys are one sgemm into per-thread scratch (Strata's
// AVX-512 kernel with K/V packed once per head, or OpenBLAS).
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "framework/backend/cpu/gemm.hpp"
#include "framework/backend/cpu/gemm_native.hpp"
#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/error.hpp"

namespace strata::cpu {
namespace {

constexpr int kBlockRows = 64;  // query rows per block

void check_sizes(int B, int T, int C, int NH) {
  STRATA_CHECK(B >= 0 && T >= 0 && C > 0 && NH > 0, "cpu",
               "attention: bad size B={} T={} C={} NH={}", B, T, C, NH);
  STRATA_CHECK(C % NH == 0, "cpu", "attention: C={} is not a multiple of NH={}", C, NH);
}

detail::Gemm make(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  detail::Gemm g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.M = M;
  g.N = N;
  g.K = K;
  g.alpha = alpha;
  g.A = A;
  g.lda = lda;
  g.B = B;
  g.ldb = ldb;
  g.beta = beta;
  g.C = C;
  g.ldc = ldc;
  return g;
}

int panels(int n) {
  return (n + detail::kGemmPanel - 1) / detail::kGemmPanel;
}

// Native-kernel forward: per (batch, head), K^T and V are packed once and reused by every block.
void forward_native(detail::GemmBlockFn kern, const float* qkv, float* out, float* lse, int B,
                    int T, int C, int NH) {
  const auto& rk = detail::row_kernels();
  const int hs = C / NH, ld = 3 * C, P = detail::kGemmPanel;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const std::int64_t heads = static_cast<std::int64_t>(B) * NH;
  const std::size_t s_sz = static_cast<std::size_t>(kBlockRows) * T;
  const std::size_t kt_sz =
      static_cast<std::size_t>(panels(T)) * hs * P;  // K^T: [hs][32] per 32 keys
  const std::size_t v_sz = static_cast<std::size_t>(panels(hs)) * T * P;  // V: [T][32] per 32 dims
  const std::size_t scratch = s_sz + kt_sz + v_sz;
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(heads)));
  detail::parallel_for(heads, [&](std::int64_t bh) {
    const int b = static_cast<int>(bh / NH), h = static_cast<int>(bh % NH);
    const float* q = qkv + static_cast<std::size_t>(b) * T * ld + static_cast<std::size_t>(h) * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* S = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    float* KT = S + s_sz;
    float* Vp = KT + kt_sz;
    detail::pack_b(k, ld, true, hs, T, KT, hs * P);
    detail::pack_b(v, ld, false, T, hs, Vp, T * P);
    for (int i0 = 0; i0 < T; i0 += kBlockRows) {
      const int rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
      kern(q + static_cast<std::size_t>(i0) * ld, ld, false, KT, hs * P, hs, rows, ncols, scale,
           0.0f, nullptr, S, T);
      rk.causal_softmax_forward(S, T, rows, i0, ncols, lse + bh * T + i0);
      float* o =
          out + (static_cast<std::size_t>(b) * T + i0) * C + static_cast<std::size_t>(h) * hs;
      kern(S, T, false, Vp, T * P, ncols, rows, hs, 1.0f, 0.0f, nullptr, o, C);
    }
  });
}

// Native-kernel backward: K^T, V^T and K packed once per (batch, head); dO and Q per block.
void backward_native(detail::GemmBlockFn kern, const float* qkv, const float* out, const float* lse,
                     const float* dout, float* dqkv, int B, int T, int C, int NH) {
  const auto& rk = detail::row_kernels();
  const int hs = C / NH, ld = 3 * C, P = detail::kGemmPanel;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const std::int64_t heads = static_cast<std::int64_t>(B) * NH;
  const std::size_t blk_sz = static_cast<std::size_t>(kBlockRows) * T;
  const std::size_t t_sz = static_cast<std::size_t>(panels(T)) * hs * P;           // K^T, V^T
  const std::size_t k_sz = static_cast<std::size_t>(panels(hs)) * T * P;           // K
  const std::size_t b_sz = static_cast<std::size_t>(panels(hs)) * kBlockRows * P;  // dO, Q blocks
  const std::size_t scratch = 2 * blk_sz + static_cast<std::size_t>(T) + 2 * t_sz + k_sz + 2 * b_sz;
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(heads)));
  detail::parallel_for(heads, [&](std::int64_t bh) {
    const int b = static_cast<int>(bh / NH), h = static_cast<int>(bh % NH);
    const std::size_t head_off =
        static_cast<std::size_t>(b) * T * ld + static_cast<std::size_t>(h) * hs;
    const float* q = qkv + head_off;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + head_off;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const std::size_t ohead =
        static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs;
    const float* o = out + ohead;
    const float* dO = dout + ohead;
    const float* L = lse + bh * T;
    float* Pm = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    float* dP = Pm + blk_sz;
    float* D = dP + blk_sz;
    float* KT = D + T;
    float* VT = KT + t_sz;
    float* Kp = VT + t_sz;
    float* dOp = Kp + k_sz;
    float* Qp = dOp + b_sz;
    detail::pack_b(k, ld, true, hs, T, KT, hs * P);
    detail::pack_b(v, ld, true, hs, T, VT, hs * P);
    detail::pack_b(k, ld, false, T, hs, Kp, T * P);
    for (int t = 0; t < T; ++t) {
      std::memset(dk + static_cast<std::size_t>(t) * ld, 0, sizeof(float) * hs);
      std::memset(dv + static_cast<std::size_t>(t) * ld, 0, sizeof(float) * hs);
      D[t] = rk.dot(dO + static_cast<std::size_t>(t) * C, o + static_cast<std::size_t>(t) * C, hs);
    }
    for (int i0 = 0; i0 < T; i0 += kBlockRows) {
      const int rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
      const float* qb = q + static_cast<std::size_t>(i0) * ld;
      const float* dOb = dO + static_cast<std::size_t>(i0) * C;
      kern(qb, ld, false, KT, hs * P, hs, rows, ncols, scale, 0.0f, nullptr, Pm, T);
      rk.causal_softmax_recompute(Pm, T, rows, i0, ncols, L + i0);
      // dV[0:ncols] += P^T dO_blk
      detail::pack_b(dOb, C, false, rows, hs, dOp, kBlockRows * P);
      kern(Pm, T, true, dOp, kBlockRows * P, rows, ncols, hs, 1.0f, 1.0f, nullptr, dv, ld);
      // dP = dO_blk V^T, then dS = P * (dP - D)
      kern(dOb, C, false, VT, hs * P, hs, rows, ncols, 1.0f, 0.0f, nullptr, dP, T);
      rk.causal_softmax_backward(Pm, dP, T, rows, i0, ncols, D + i0);
      // dQ_blk = scale dS K ; dK[0:ncols] += scale dS^T Q_blk
      kern(dP, T, false, Kp, T * P, ncols, rows, hs, scale, 0.0f, nullptr,
           dq + static_cast<std::size_t>(i0) * ld, ld);
      detail::pack_b(qb, ld, false, rows, hs, Qp, kBlockRows * P);
      kern(dP, T, true, Qp, kBlockRows * P, rows, ncols, hs, scale, 1.0f, nullptr, dk, ld);
    }
  });
}

}  // namespace

void attention_forward(const float* qkv, float* out, float* lse, int B, int T, int C, int NH) {
  check_sizes(B, T, C, NH);
  if (B == 0 || T == 0) return;
  if (detail::GemmBlockFn kern = detail::native_gemm_kernel()) {
    forward_native(kern, qkv, out, lse, B, T, C, NH);
    return;
  }
  const auto& rk = detail::row_kernels();
  const int hs = C / NH, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int nblk = (T + kBlockRows - 1) / kBlockRows;
  const std::int64_t heads = static_cast<std::int64_t>(B) * NH;
  const std::int64_t tasks = heads * nblk;
  const std::size_t scratch = static_cast<std::size_t>(kBlockRows) * T;
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(tasks)));
  detail::use_single_threaded_blas();
  // Largest (last) row blocks first, for the dynamic schedule.
  detail::parallel_for(tasks, [&](std::int64_t task) {
    const int blk = nblk - 1 - static_cast<int>(task / heads);
    const std::int64_t bh = task % heads;
    const int b = static_cast<int>(bh / NH), h = static_cast<int>(bh % NH);
    const float* q = qkv + static_cast<std::size_t>(b) * T * ld + static_cast<std::size_t>(h) * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    const int i0 = blk * kBlockRows, rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
    float* S = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    detail::gemm_serial(make(false, true, rows, ncols, hs, scale,
                             q + static_cast<std::size_t>(i0) * ld, ld, k, ld, 0.0f, S, T));
    rk.causal_softmax_forward(S, T, rows, i0, ncols, lse + bh * T + i0);
    float* o = out + (static_cast<std::size_t>(b) * T + i0) * C + static_cast<std::size_t>(h) * hs;
    detail::gemm_serial(make(false, false, rows, hs, ncols, 1.0f, S, T, v, ld, 0.0f, o, C));
  });
}

void attention_backward(const float* qkv, const float* out, const float* lse, const float* dout,
                        float* dqkv, int B, int T, int C, int NH) {
  check_sizes(B, T, C, NH);
  if (B == 0 || T == 0) return;
  if (detail::GemmBlockFn kern = detail::native_gemm_kernel()) {
    backward_native(kern, qkv, out, lse, dout, dqkv, B, T, C, NH);
    return;
  }
  const auto& rk = detail::row_kernels();
  const int hs = C / NH, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int nblk = (T + kBlockRows - 1) / kBlockRows;
  const std::int64_t heads = static_cast<std::int64_t>(B) * NH;
  // Per thread: P and dP blocks [kBlockRows, T], and D[T].
  const std::size_t blk_sz = static_cast<std::size_t>(kBlockRows) * T;
  const std::size_t scratch = 2 * blk_sz + static_cast<std::size_t>(T);
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(heads)));
  detail::use_single_threaded_blas();
  detail::parallel_for(heads, [&](std::int64_t bh) {
    const int b = static_cast<int>(bh / NH), h = static_cast<int>(bh % NH);
    const std::size_t head_off =
        static_cast<std::size_t>(b) * T * ld + static_cast<std::size_t>(h) * hs;
    const float* q = qkv + head_off;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + head_off;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const std::size_t ohead =
        static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs;
    const float* o = out + ohead;
    const float* dO = dout + ohead;
    const float* L = lse + bh * T;
    float* P = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    float* dP = P + blk_sz;
    float* D = dP + blk_sz;
    for (int t = 0; t < T; ++t) {
      std::memset(dk + static_cast<std::size_t>(t) * ld, 0, sizeof(float) * hs);
      std::memset(dv + static_cast<std::size_t>(t) * ld, 0, sizeof(float) * hs);
      D[t] = rk.dot(dO + static_cast<std::size_t>(t) * C, o + static_cast<std::size_t>(t) * C, hs);
    }
    for (int blk = 0; blk < nblk; ++blk) {
      const int i0 = blk * kBlockRows, rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
      const float* qb = q + static_cast<std::size_t>(i0) * ld;
      const float* dOb = dO + static_cast<std::size_t>(i0) * C;
      detail::gemm_serial(make(false, true, rows, ncols, hs, scale, qb, ld, k, ld, 0.0f, P, T));
      rk.causal_softmax_recompute(P, T, rows, i0, ncols, L + i0);
      // dV[0:ncols] += P^T dO_blk
      detail::gemm_serial(make(true, false, ncols, hs, rows, 1.0f, P, T, dOb, C, 1.0f, dv, ld));
      // dP = dO_blk V^T, then dS = P * (dP - D)
      detail::gemm_serial(make(false, true, rows, ncols, hs, 1.0f, dOb, C, v, ld, 0.0f, dP, T));
      rk.causal_softmax_backward(P, dP, T, rows, i0, ncols, D + i0);
      // dQ_blk = scale dS K ; dK[0:ncols] += scale dS^T Q_blk
      detail::gemm_serial(make(false, false, rows, hs, ncols, scale, dP, T, k, ld, 0.0f,
                               dq + static_cast<std::size_t>(i0) * ld, ld));
      detail::gemm_serial(make(true, false, ncols, hs, rows, scale, dP, T, qb, ld, 1.0f, dk, ld));
    }
  });
}

}  // namespace strata::cpu
