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
  return {.trans_a = ta, .trans_b = tb, .M = M, .N = N, .K = K, .alpha = alpha, .A = A,
          .lda = lda, .B = B, .ldb = ldb, .beta = beta, .C = C, .ldc = ldc};
}

int panels(int n) {
  return (n + detail::kGemmPanel - 1) / detail::kGemmPanel;
}

// Sizes of causal attention over qkv [B, T, 3C] (rows q | k | v) and out [B, T, C], and where the
// rows of one (batch, head) pair bh = b * NH + h start.
struct Heads {
  int T, C, NH;
  int hs;              // head size
  int ld;              // row stride of qkv
  float scale;         // 1 / sqrt(hs)
  std::int64_t count;  // B * NH
  Heads(int B, int T_, int C_, int NH_)
      : T(T_), C(C_), NH(NH_), hs(C_ / NH_), ld(3 * C_),
        scale(1.0f / std::sqrt(static_cast<float>(C_ / NH_))),
        count(static_cast<std::int64_t>(B) * NH_) {}
  // Head bh's q in qkv (its k and v follow at + C and + 2C).
  std::size_t qkv_offset(std::int64_t bh) const {
    return static_cast<std::size_t>(bh / NH) * T * ld + static_cast<std::size_t>(bh % NH) * hs;
  }
  // Head bh's slice of out (and of dout).
  std::size_t out_offset(std::int64_t bh) const {
    return static_cast<std::size_t>(bh / NH) * T * C + static_cast<std::size_t>(bh % NH) * hs;
  }
};

// The rows of one (batch, head) pair that backward reads and writes.
struct HeadGrads {
  const float *q, *k, *v, *o, *dO, *L;
  float *dq, *dk, *dv;
  HeadGrads(const Heads& hd, std::int64_t bh, const float* qkv, const float* out, const float* lse,
            const float* dout, float* dqkv)
      : q(qkv + hd.qkv_offset(bh)), k(q + hd.C), v(q + 2 * hd.C), o(out + hd.out_offset(bh)),
        dO(dout + hd.out_offset(bh)), L(lse + bh * hd.T), dq(dqkv + hd.qkv_offset(bh)),
        dk(dq + hd.C), dv(dq + 2 * hd.C) {}
};

// Backward's start on one head: zeroes its rows of dK and dV, and D[t] = dO[t] . O[t].
void begin_head_backward(const Heads& hd, const HeadGrads& h, float* D) {
  const auto& rk = detail::row_kernels();
  for (int t = 0; t < hd.T; ++t) {
    std::memset(h.dk + static_cast<std::size_t>(t) * hd.ld, 0, sizeof(float) * hd.hs);
    std::memset(h.dv + static_cast<std::size_t>(t) * hd.ld, 0, sizeof(float) * hd.hs);
    D[t] = rk.dot(h.dO + static_cast<std::size_t>(t) * hd.C,
                  h.o + static_cast<std::size_t>(t) * hd.C, hd.hs);
  }
}

// Native-kernel forward: per (batch, head), K^T and V are packed once and reused by every block.
void forward_native(detail::GemmBlockFn kern, const float* qkv, float* out, float* lse, int B,
                    int T, int C, int NH) {
  const auto& rk = detail::row_kernels();
  const Heads hd(B, T, C, NH);
  const int hs = hd.hs, ld = hd.ld, P = detail::kGemmPanel;
  const std::size_t s_sz = static_cast<std::size_t>(kBlockRows) * T;
  const std::size_t kt_sz =
      static_cast<std::size_t>(panels(T)) * hs * P;  // K^T: [hs][32] per 32 keys
  const std::size_t v_sz = static_cast<std::size_t>(panels(hs)) * T * P;  // V: [T][32] per 32 dims
  const std::size_t scratch = s_sz + kt_sz + v_sz;
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(hd.count)));
  detail::parallel_for(hd.count, [&](std::int64_t bh) {
    const float* q = qkv + hd.qkv_offset(bh);
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* S = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    float* KT = S + s_sz;
    float* Vp = KT + kt_sz;
    detail::pack_b(k, ld, true, hs, T, KT, hs * P);
    detail::pack_b(v, ld, false, T, hs, Vp, T * P);
    for (int i0 = 0; i0 < T; i0 += kBlockRows) {
      const int rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
      kern(q + static_cast<std::size_t>(i0) * ld, ld, false, KT, hs * P, hs, rows, ncols, hd.scale,
           0.0f, nullptr, S, T);
      rk.causal_softmax_forward(S, T, rows, i0, ncols, lse + bh * T + i0);
      float* o = out + hd.out_offset(bh) + static_cast<std::size_t>(i0) * C;
      kern(S, T, false, Vp, T * P, ncols, rows, hs, 1.0f, 0.0f, nullptr, o, C);
    }
  });
}

// Floats of the native backward's packed operands per thread: K^T and V^T, K, and a block of dO
// and of Q.
std::size_t native_backward_packs(const Heads& hd) {
  const std::size_t P = detail::kGemmPanel;
  const std::size_t t_sz = static_cast<std::size_t>(panels(hd.T)) * hd.hs * P;
  const std::size_t k_sz = static_cast<std::size_t>(panels(hd.hs)) * hd.T * P;
  const std::size_t b_sz = static_cast<std::size_t>(panels(hd.hs)) * kBlockRows * P;
  return 2 * t_sz + k_sz + 2 * b_sz;
}

// One head's backward on the native kernel: K^T, V^T and K packed once; dO and Q per block.
// Pm and dP hold [kBlockRows, T], D[T] is dO . O per row, packs native_backward_packs() floats.
void backward_head_native(detail::GemmBlockFn kern, const Heads& hd, const HeadGrads& h,
                          float* Pm, float* dP, const float* D, float* packs) {
  const auto& rk = detail::row_kernels();
  const int T = hd.T, C = hd.C, hs = hd.hs, ld = hd.ld, P = detail::kGemmPanel;
  const float scale = hd.scale;
  const std::size_t t_sz = static_cast<std::size_t>(panels(T)) * hs * P;
  const std::size_t k_sz = static_cast<std::size_t>(panels(hs)) * T * P;
  const std::size_t b_sz = static_cast<std::size_t>(panels(hs)) * kBlockRows * P;
  float* KT = packs;
  float* VT = KT + t_sz;
  float* Kp = VT + t_sz;
  float* dOp = Kp + k_sz;
  float* Qp = dOp + b_sz;
  detail::pack_b(h.k, ld, true, hs, T, KT, hs * P);
  detail::pack_b(h.v, ld, true, hs, T, VT, hs * P);
  detail::pack_b(h.k, ld, false, T, hs, Kp, T * P);
  for (int i0 = 0; i0 < T; i0 += kBlockRows) {
    const int rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
    const float* qb = h.q + static_cast<std::size_t>(i0) * ld;
    const float* dOb = h.dO + static_cast<std::size_t>(i0) * C;
    kern(qb, ld, false, KT, hs * P, hs, rows, ncols, scale, 0.0f, nullptr, Pm, T);
    rk.causal_softmax_recompute(Pm, T, rows, i0, ncols, h.L + i0);
    // dV[0:ncols] += P^T dO_blk
    detail::pack_b(dOb, C, false, rows, hs, dOp, kBlockRows * P);
    kern(Pm, T, true, dOp, kBlockRows * P, rows, ncols, hs, 1.0f, 1.0f, nullptr, h.dv, ld);
    // dP = dO_blk V^T, then dS = P * (dP - D)
    kern(dOb, C, false, VT, hs * P, hs, rows, ncols, 1.0f, 0.0f, nullptr, dP, T);
    rk.causal_softmax_backward(Pm, dP, T, rows, i0, ncols, D + i0);
    // dQ_blk = scale dS K ; dK[0:ncols] += scale dS^T Q_blk
    kern(dP, T, false, Kp, T * P, ncols, rows, hs, scale, 0.0f, nullptr,
         h.dq + static_cast<std::size_t>(i0) * ld, ld);
    detail::pack_b(qb, ld, false, rows, hs, Qp, kBlockRows * P);
    kern(dP, T, true, Qp, kBlockRows * P, rows, ncols, hs, scale, 1.0f, nullptr, h.dk, ld);
  }
}

// The same with single-threaded BLAS calls on the operands in place.
void backward_head_blas(const Heads& hd, const HeadGrads& h, float* P, float* dP, const float* D) {
  const auto& rk = detail::row_kernels();
  const int T = hd.T, C = hd.C, hs = hd.hs, ld = hd.ld;
  const float scale = hd.scale;
  for (int i0 = 0; i0 < T; i0 += kBlockRows) {
    const int rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
    const float* qb = h.q + static_cast<std::size_t>(i0) * ld;
    const float* dOb = h.dO + static_cast<std::size_t>(i0) * C;
    detail::gemm_serial(make(false, true, rows, ncols, hs, scale, qb, ld, h.k, ld, 0.0f, P, T));
    rk.causal_softmax_recompute(P, T, rows, i0, ncols, h.L + i0);
    // dV[0:ncols] += P^T dO_blk
    detail::gemm_serial(make(true, false, ncols, hs, rows, 1.0f, P, T, dOb, C, 1.0f, h.dv, ld));
    // dP = dO_blk V^T, then dS = P * (dP - D)
    detail::gemm_serial(make(false, true, rows, ncols, hs, 1.0f, dOb, C, h.v, ld, 0.0f, dP, T));
    rk.causal_softmax_backward(P, dP, T, rows, i0, ncols, D + i0);
    // dQ_blk = scale dS K ; dK[0:ncols] += scale dS^T Q_blk
    detail::gemm_serial(make(false, false, rows, hs, ncols, scale, dP, T, h.k, ld, 0.0f,
                             h.dq + static_cast<std::size_t>(i0) * ld, ld));
    detail::gemm_serial(make(true, false, ncols, hs, rows, scale, dP, T, qb, ld, 1.0f, h.dk, ld));
  }
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
  const Heads hd(B, T, C, NH);
  const int hs = hd.hs, ld = hd.ld;
  const int nblk = (T + kBlockRows - 1) / kBlockRows;
  const std::int64_t tasks = hd.count * nblk;
  const std::size_t scratch = static_cast<std::size_t>(kBlockRows) * T;
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(tasks)));
  detail::use_single_threaded_blas();
  // Largest (last) row blocks first, for the dynamic schedule.
  detail::parallel_for(tasks, [&](std::int64_t task) {
    const int blk = nblk - 1 - static_cast<int>(task / hd.count);
    const std::int64_t bh = task % hd.count;
    const float* q = qkv + hd.qkv_offset(bh);
    const float* k = q + C;
    const float* v = q + 2 * C;
    const int i0 = blk * kBlockRows, rows = std::min(kBlockRows, T - i0), ncols = i0 + rows;
    float* S = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    detail::gemm_serial(make(false, true, rows, ncols, hs, hd.scale,
                             q + static_cast<std::size_t>(i0) * ld, ld, k, ld, 0.0f, S, T));
    rk.causal_softmax_forward(S, T, rows, i0, ncols, lse + bh * T + i0);
    float* o = out + hd.out_offset(bh) + static_cast<std::size_t>(i0) * C;
    detail::gemm_serial(make(false, false, rows, hs, ncols, 1.0f, S, T, v, ld, 0.0f, o, C));
  });
}

void attention_backward(const float* qkv, const float* out, const float* lse, const float* dout,
                        float* dqkv, int B, int T, int C, int NH) {
  check_sizes(B, T, C, NH);
  if (B == 0 || T == 0) return;
  const Heads hd(B, T, C, NH);
  const detail::GemmBlockFn kern = detail::native_gemm_kernel();
  // Per thread: P and dP blocks [kBlockRows, T], D[T], and the native kernel's packed operands.
  const std::size_t blk_sz = static_cast<std::size_t>(kBlockRows) * T;
  const std::size_t scratch =
      2 * blk_sz + static_cast<std::size_t>(T) + (kern ? native_backward_packs(hd) : 0);
  std::vector<float> buf(scratch * static_cast<std::size_t>(detail::team_size(hd.count)));
  if (!kern) detail::use_single_threaded_blas();
  detail::parallel_for(hd.count, [&](std::int64_t bh) {
    const HeadGrads h(hd, bh, qkv, out, lse, dout, dqkv);
    float* P = buf.data() + scratch * static_cast<std::size_t>(detail::thread_index());
    float* dP = P + blk_sz;
    float* D = dP + blk_sz;
    begin_head_backward(hd, h, D);
    if (kern) {
      backward_head_native(kern, hd, h, P, dP, D, D + T);
    } else {
      backward_head_blas(hd, h, P, dP, D);
    }
  });
}

}  // namespace strata::cpu
