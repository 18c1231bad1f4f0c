// Thread-count-independent sgemm: Strata's AVX-512 kernel on packed B panels where available,
// else output tiles of single-threaded OpenBLAS calls.
#include "framework/backend/cpu/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "framework/backend/cpu/gemm_native.hpp"
#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/convert.hpp"

namespace strata::cpu::detail {
namespace {

constexpr int kTileRows = 128;          // BLAS path: output rows per tile
constexpr int kTargetTiles = 16;        // BLAS path: split columns too until about this many
constexpr double kSerialFlops = 4.0e6;  // below this, one thread

constexpr int kKc = 256;  // native path: k block (B panel of kc x 32 floats = 32 KiB)
constexpr int kNc = 512;  // native path: columns packed at once (kc x nc = 512 KiB)
constexpr int kMb = 96;   // native path: rows per task
constexpr int kNb = 128;  // native path: columns per task (a multiple of kGemmPanel)
constexpr int kKRun = 8 * kKc;  // native path: k values packed per barrier (<= 4 MiB of B)
static_assert(kKc >= kGemmPanel, "pack_panel widens a panel row into a kKc scratch");

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}
int round_up(int a, int m) {
  return ceil_div(a, m) * m;
}

// C = beta * C (+ bias) for the empty product.
void scale_only(const Gemm& g, int m0, int m1, int n0, int n1) {
  for (int i = m0; i < m1; ++i) {
    float* c = g.C + static_cast<std::size_t>(i) * g.ldc;
    for (int j = n0; j < n1; ++j) {
      c[j] = (g.beta == 0.0f ? 0.0f : g.beta * c[j]) + (g.bias ? g.bias[j] : 0.0f);
    }
  }
}

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

}  // namespace

namespace {

// n values of B from `src` as f32: the values themselves, or 16-bit ones widened into `tmp`.
const float* as_f32(const float* src, DType, float*, int) { return src; }
const float* as_f32(const std::uint16_t* src, DType dtype, float* tmp, int n) {
  convert(src, dtype, tmp, DType::f32, static_cast<std::size_t>(n));
  return tmp;
}

template <typename T>
void pack_panel(const T* B, DType dtype, int ldb, bool trans_b, int kc, int n, int p, float* Bp,
                int bstride) {
  float* dst = Bp + static_cast<std::size_t>(p) * bstride;
  const int j0 = p * kGemmPanel;
  const int w = std::min(kGemmPanel, n - j0);
  alignas(64) float tmp[kKc];  // widened 16-bit values (unused for f32)
  if (!trans_b) {  // B(k, j) = B[k*ldb + j]
    for (int k = 0; k < kc; ++k) {
      float* d = dst + static_cast<std::size_t>(k) * kGemmPanel;
      std::memcpy(d, as_f32(B + static_cast<std::size_t>(k) * ldb + j0, dtype, tmp, w),
                  sizeof(float) * w);
      if (w < kGemmPanel) std::memset(d + w, 0, sizeof(float) * (kGemmPanel - w));
    }
    return;
  }
  // B(k, j) = B[j*ldb + k]: transpose up to 32 columns, a run of at most kKc values of k at a time.
  if (w < kGemmPanel) std::memset(dst, 0, sizeof(float) * kc * kGemmPanel);
  for (int jj = 0; jj < w; ++jj) {
    const T* src = B + static_cast<std::size_t>(j0 + jj) * ldb;
    for (int k0 = 0; k0 < kc; k0 += kKc) {
      const int len = std::min(kKc, kc - k0);
      const float* run = as_f32(src + k0, dtype, tmp, len);
      for (int k = 0; k < len; ++k) dst[static_cast<std::size_t>(k0 + k) * kGemmPanel + jj] = run[k];
    }
  }
}

}  // namespace

void pack_b_panel(const float* B, int ldb, bool trans_b, int kc, int n, int p, float* Bp,
                  int bstride) {
  pack_panel(B, DType::f32, ldb, trans_b, kc, n, p, Bp, bstride);
}

void pack_b_panel16(const std::uint16_t* B, DType dtype, int ldb, bool trans_b, int kc, int n,
                    int p, float* Bp, int bstride) {
  pack_panel(B, dtype, ldb, trans_b, kc, n, p, Bp, bstride);
}

void pack_b(const float* B, int ldb, bool trans_b, int kc, int n, float* Bp, int bstride) {
  for (int p = 0; p * kGemmPanel < n; ++p) pack_b_panel(B, ldb, trans_b, kc, n, p, Bp, bstride);
}

GemmBlockFn native_gemm_kernel() {
  static const bool disabled = [] {
    const char* e = std::getenv("STRATA_CPU_GEMM");
    return e != nullptr && std::strcmp(e, "blas") == 0;
  }();
  if (disabled) return nullptr;
  // The AVX-512 kernel goes with the AVX-512 row kernels (so tests forcing "avx2" or "generic"
  // exercise the BLAS path).
  if (std::strcmp(row_kernels().name, "avx512") != 0) return nullptr;
  return gemm_block_avx512();
}

void gemm_native(const Gemm& g, GemmBlockFn kernel) {
  if (g.M <= 0 || g.N <= 0) return;
  if (g.K == 0 || g.alpha == 0.0f) {
    parallel_chunks(g.M, 64, [&](std::int64_t m0, std::int64_t m1) {
      scale_only(g, static_cast<int>(m0), static_cast<int>(m1), 0, g.N);
    });
    return;
  }
  // Per phase (a column block of up to kNc and a run of up to kKRun k values), the threads
  // first pack every k block of the run together (one barrier), then each output tile runs
  // through the run's k blocks in order. A product with K <= kKRun therefore costs a single
  // barrier per column block, which matters when a thread loses its core to another process;
  // each output still sums its k blocks in order, so results are the same for any thread count.
  const int kc_max = std::min(kKc, g.K);
  const int nc_max = std::min(kNc, round_up(g.N, kGemmPanel));
  const int run_max = std::min(kKRun, g.K);
  const int blocks_max = ceil_div(run_max, kKc);
  const std::size_t blk_size = static_cast<std::size_t>(kc_max) * nc_max;  // one k block
  // Two run buffers: run p+1 is packed into one while late threads may still be reading run p
  // from the other.
  const std::size_t run_size = blk_size * static_cast<std::size_t>(blocks_max);
  // Kept per calling thread and only grown: a fresh allocation per product (megabytes, which
  // glibc maps and unmaps) page-faulted and zeroed its pages on every call.
  thread_local std::unique_ptr<float[], AlignedFree> pack;
  thread_local std::size_t pack_size = 0;
  if (pack_size < 2 * run_size) {
    pack.reset();
    pack.reset(static_cast<float*>(::operator new[](sizeof(float) * 2 * run_size, std::align_val_t(64))));
    pack_size = 2 * run_size;
  }
  float* const buf = pack.get();
  // (The native kernel runs only on AVX-512, so its packing may too.)
  static const PackBf16Fn pack_bf16 = pack_bf16_avx512();
  const double flops = 2.0 * g.M * g.N * g.K;
  const int max_tasks = ceil_div(g.M, kMb) * ceil_div(std::min(g.N, kNc), kNb);
  const int nt = flops < kSerialFlops ? 1 : team_size(max_tasks);

#pragma omp parallel num_threads(nt)
  {
    int phase = 0;
    for (int jc = 0; jc < g.N; jc += kNc) {
      const int nc = std::min(kNc, g.N - jc);
      const int panels = ceil_div(nc, kGemmPanel);
      for (int p0 = 0; p0 < g.K; p0 += kKRun, ++phase) {
        const int run = std::min(kKRun, g.K - p0);
        const int blocks = ceil_div(run, kKc);
        float* Bp = buf + (phase % 2) * run_size;
        // Every thread has finished the compute of phase - 1 before the barrier ending this loop,
        // so the buffer of phase - 2 is free to overwrite here and Bp is complete after it.
#pragma omp for schedule(static)
        for (int t = 0; t < blocks * panels; ++t) {
          const int kb = t / panels, p = t % panels;
          const int pc = p0 + kb * kKc, kc = std::min(kKc, g.K - pc);
          // op(B) at (pc, jc).
          const std::size_t at = g.trans_b ? static_cast<std::size_t>(jc) * g.ldb + pc
                                           : static_cast<std::size_t>(pc) * g.ldb + jc;
          if (g.B16 && g.b16_dtype == DType::bf16 && pack_bf16)
            pack_bf16(g.B16 + at, g.ldb, g.trans_b, kc, nc, p, Bp + kb * blk_size, kc * kGemmPanel);
          else if (g.B16)
            pack_b_panel16(g.B16 + at, g.b16_dtype, g.ldb, g.trans_b, kc, nc, p,
                           Bp + kb * blk_size, kc * kGemmPanel);
          else
            pack_b_panel(g.B + at, g.ldb, g.trans_b, kc, nc, p, Bp + kb * blk_size, kc * kGemmPanel);
        }
        const int mt = ceil_div(g.M, kMb), ntiles = ceil_div(nc, kNb);
#pragma omp for schedule(dynamic, 1) nowait
        for (int t = 0; t < mt * ntiles; ++t) {
          const int i0 = (t / ntiles) * kMb, j0 = (t % ntiles) * kNb;
          const int rows = std::min(kMb, g.M - i0), n = std::min(kNb, nc - j0);
          float* C = g.C + static_cast<std::size_t>(i0) * g.ldc + jc + j0;
          for (int kb = 0; kb < blocks; ++kb) {
            const int pc = p0 + kb * kKc, kc = std::min(kKc, g.K - pc);
            const float beta = pc == 0 ? g.beta : 1.0f;
            const float* bias = pc == 0 && g.bias ? g.bias + jc + j0 : nullptr;
            const float* A = g.trans_a ? g.A + static_cast<std::size_t>(pc) * g.lda + i0
                                       : g.A + static_cast<std::size_t>(i0) * g.lda + pc;
            kernel(A, g.lda, g.trans_a, Bp + kb * blk_size + static_cast<std::size_t>(j0) * kc,
                   kc * kGemmPanel, kc, rows, n, g.alpha, beta, bias, C, g.ldc);
          }
        }
      }
    }
  }  // (implicit barrier)
}

void gemm_tile(const Gemm& g, int m0, int m1, int n0, int n1) {
  const int m = m1 - m0, n = n1 - n0;
  if (m <= 0 || n <= 0) return;
  if (g.K == 0 || g.alpha == 0.0f) {  // BLAS may skip the product; do beta * C ourselves
    Gemm h = g;
    h.bias = nullptr;
    scale_only(h, m0, m1, n0, n1);
    return;
  }
  float* C = g.C + static_cast<std::size_t>(m0) * g.ldc + n0;
  // Row m0 of op(A) and column n0 of op(B).
  const float* A = g.trans_a ? g.A + m0 : g.A + static_cast<std::size_t>(m0) * g.lda;
  const float* B = nullptr;
  int ldb = g.ldb;
  std::vector<float> wide;  // 16-bit B: the tile's columns of op(B), widened
  if (g.B16) {
    const auto k = static_cast<std::size_t>(g.K), w = static_cast<std::size_t>(n);
    wide.resize(k * w);
    if (g.trans_b) {  // rows n0..n1 of B, K contiguous values each
      for (std::size_t j = 0; j < w; ++j)
        convert(g.B16 + (n0 + j) * static_cast<std::size_t>(g.ldb), g.b16_dtype,
                wide.data() + j * k, DType::f32, k);
      ldb = g.K;
    } else {  // columns n0..n1 of every row of B
      for (std::size_t r = 0; r < k; ++r)
        convert(g.B16 + r * static_cast<std::size_t>(g.ldb) + n0, g.b16_dtype, wide.data() + r * w,
                DType::f32, w);
      ldb = n;
    }
    B = wide.data();
  } else {
    B = g.trans_b ? g.B + static_cast<std::size_t>(n0) * g.ldb : g.B + n0;
  }
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, m, n, g.K, g.alpha, A, g.lda, B, ldb, g.beta,
              C, g.ldc);
}

void plan_tiles(int job, const Gemm& g, std::vector<GemmTile>& tiles) {
  if (g.M <= 0 || g.N <= 0) return;
  const double flops = 2.0 * g.M * g.N * std::max(g.K, 1);
  if (flops < kSerialFlops) {
    tiles.push_back({job, 0, g.M, 0, g.N});
    return;
  }
  const int mt = ceil_div(g.M, kTileRows);
  const int mb = round_up(ceil_div(g.M, mt), 16);
  int nt = 1;
  if (mt < kTargetTiles) nt = std::max(1, std::min(ceil_div(g.N, 128), ceil_div(kTargetTiles, mt)));
  const int nb = round_up(ceil_div(g.N, nt), 16);
  for (int m0 = 0; m0 < g.M; m0 += mb) {
    for (int n0 = 0; n0 < g.N; n0 += nb) {
      tiles.push_back({job, m0, std::min(g.M, m0 + mb), n0, std::min(g.N, n0 + nb)});
    }
  }
}

void gemm(const Gemm& g) {
  if (GemmBlockFn k = native_gemm_kernel()) {
    gemm_native(g, k);
    return;
  }
  std::vector<GemmTile> tiles;
  plan_tiles(0, g, tiles);
  use_single_threaded_blas();
  parallel_for(static_cast<std::int64_t>(tiles.size()), [&](std::int64_t i) {
    const GemmTile& t = tiles[static_cast<std::size_t>(i)];
    if (g.bias) {  // C = bias, then C += product
      for (int r = t.m0; r < t.m1; ++r) {
        float* c = g.C + static_cast<std::size_t>(r) * g.ldc;
        std::copy(g.bias + t.n0, g.bias + t.n1, c + t.n0);
      }
      Gemm h = g;
      h.beta = 1.0f;
      gemm_tile(h, t.m0, t.m1, t.n0, t.n1);
    } else {
      gemm_tile(g, t.m0, t.m1, t.n0, t.n1);
    }
  });
}

}  // namespace strata::cpu::detail
