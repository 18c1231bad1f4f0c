// matmul and the fully connected layer (forward and backward) on the tiled sgemm.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/gemm.hpp"
#include "framework/backend/cpu/gemm_native.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/error.hpp"

namespace strata::cpu {

using detail::Gemm;
using detail::GemmTile;

void matmul(const float* A, const float* B, float* C, int M, int N, int K, bool trans_a,
            bool trans_b, float alpha, float beta) {
  STRATA_CHECK(M >= 0 && N >= 0 && K >= 0, "cpu", "matmul: negative size M={} N={} K={}", M, N, K);
  detail::gemm(Gemm{.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K, .alpha = alpha,
                    .A = A, .lda = std::max(1, trans_a ? M : K), .B = B,
                    .ldb = std::max(1, trans_b ? K : N), .beta = beta, .C = C,
                    .ldc = std::max(1, N)});
}

namespace {

// The weight of a linear layer: f32 values, or 16-bit ones (w16, of dtype wt).
struct Weight {
  const float* f32 = nullptr;
  const std::uint16_t* w16 = nullptr;
  DType wt = DType::f32;
};

void check_weight(DType wt) {
  STRATA_CHECK(wt == DType::bf16 || wt == DType::f16, "cpu",
               "linear: 16-bit weights must be bf16 or f16, got {}", dtype_name(wt));
}

void forward(const float* x, Weight W, const float* b, float* y, int N, int in, int out) {
  STRATA_CHECK(N >= 0 && in >= 0 && out >= 0, "cpu", "linear: negative size N={} in={} out={}", N,
               in, out);
  detail::gemm(Gemm{.trans_b = true, .M = N, .N = out, .K = in, .A = x, .lda = std::max(1, in),
                    .B = W.f32, .B16 = W.w16, .b16_dtype = W.wt, .ldb = std::max(1, in), .C = y,
                    .ldc = std::max(1, out), .bias = b});
}

void backward(const float* x, Weight W, const float* dy, float* dx, float* dW, float* db, int N,
              int in, int out, bool accumulate) {
  STRATA_CHECK(N >= 0 && in >= 0 && out >= 0, "cpu", "linear: negative size N={} in={} out={}", N,
               in, out);
  // dx[N,in] = dy[N,out] @ W[out,in]
  const Gemm gx{.M = N, .N = in, .K = out, .A = dy, .lda = std::max(1, out), .B = W.f32,
                .B16 = W.w16, .b16_dtype = W.wt, .ldb = std::max(1, in), .C = dx,
                .ldc = std::max(1, in)};
  // dW[out,in] += dy^T @ x (= when not accumulating: beta 0 never reads dW)
  const Gemm gw{.trans_a = true, .M = out, .N = in, .K = N, .A = dy, .lda = std::max(1, out),
                .B = x, .ldb = std::max(1, in), .beta = accumulate ? 1.0f : 0.0f, .C = dW,
                .ldc = std::max(1, in)};

  constexpr int kBiasCols = 64;
  // db[c0:c1] += column sums of dy, rows in order (from 0 when not accumulating).
  auto bias_block = [&](int c0, int c1) {
    float acc[kBiasCols];
    const int w = c1 - c0;
    if (accumulate) std::copy(db + c0, db + c1, acc);
    else std::fill(acc, acc + w, 0.0f);
    for (int r = 0; r < N; ++r) {
      const float* g = dy + static_cast<std::size_t>(r) * out + c0;
      for (int c = 0; c < w; ++c) acc[c] += g[c];
    }
    std::copy(acc, acc + w, db + c0);
  };

  if (detail::native_gemm_kernel() != nullptr) {
    if (dx) detail::gemm(gx);
    if (dW) detail::gemm(gw);
    if (db) {
      detail::parallel_chunks(out, kBiasCols, [&](std::int64_t c0, std::int64_t c1) {
        bias_block(static_cast<int>(c0), static_cast<int>(c1));
      });
    }
    return;
  }
  // BLAS: one task list of dW tiles (largest first), dx tiles, then db column blocks (job 2).
  std::vector<GemmTile> tiles;
  if (dW) detail::plan_tiles(1, gw, tiles);
  if (dx) detail::plan_tiles(0, gx, tiles);
  if (db) {
    for (int c0 = 0; c0 < out; c0 += kBiasCols) {
      tiles.push_back({2, 0, N, c0, std::min(out, c0 + kBiasCols)});
    }
  }
  detail::use_single_threaded_blas();
  detail::parallel_for(static_cast<std::int64_t>(tiles.size()), [&](std::int64_t i) {
    const GemmTile& t = tiles[static_cast<std::size_t>(i)];
    if (t.job == 0) {
      detail::gemm_tile(gx, t.m0, t.m1, t.n0, t.n1);
    } else if (t.job == 1) {
      detail::gemm_tile(gw, t.m0, t.m1, t.n0, t.n1);
    } else {
      bias_block(t.n0, t.n1);
    }
  });
}

}  // namespace

void linear_forward(const float* x, const float* W, const float* b, float* y, int N, int in,
                    int out) {
  forward(x, Weight{.f32 = W}, b, y, N, in, out);
}

void linear_backward(const float* x, const float* W, const float* dy, float* dx, float* dW,
                     float* db, int N, int in, int out, bool accumulate) {
  backward(x, Weight{.f32 = W}, dy, dx, dW, db, N, in, out, accumulate);
}

void linear_forward_w16(const float* x, const std::uint16_t* W, DType wt, const float* b, float* y,
                        int N, int in, int out) {
  check_weight(wt);
  forward(x, Weight{.w16 = W, .wt = wt}, b, y, N, in, out);
}

void linear_backward_w16(const float* x, const std::uint16_t* W, DType wt, const float* dy,
                         float* dx, float* dW, float* db, int N, int in, int out, bool accumulate) {
  check_weight(wt);
  backward(x, Weight{.w16 = W, .wt = wt}, dy, dx, dW, db, N, in, out, accumulate);
}

}  // namespace strata::cpu
