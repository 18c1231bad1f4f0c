// matmul, linear_forward and linear_backward on CUDA tensors, through cuBLASLt.
//
// Every product is C = alpha op(A) op(B) + beta C on row-major tensors, computed with f32
// accumulation (CUBLAS_COMPUTE_32F; CUBLAS_COMPUTE_32F_FAST_TF32 for f32 operands only with
// strata.allow_tf32: framework/backend/math_mode.hpp). cuBLASLt is column-major: a row-major
// [r, c] matrix is the column-major [c, r] one, so the row-major C = op(A) op(B) is computed as
// the column-major C^T = op(B)^T op(A)^T, i.e. cuBLASLt's "A" is our B and its "B" our A, with m = N, n = M.
//
// Dtypes (each operand f32, bf16 or f16, as the CPU accepts them):
//   - A and B of the same 16-bit dtype: the 16-bit product runs directly (16-bit inputs, f32
//     compute), writing C itself when C is f32 or of that dtype; bf16 needs compute capability
//     8.0 (on a T4, sm_75, bf16 operands are widened to f32).
//   - any other mix: the 16-bit operand(s) are widened to f32 (In32) and the product runs in f32.
//   - a C the product cannot write directly (a 16-bit C of another dtype than 16-bit operands, a
//     16-bit C of an f32 product, or any 16-bit C with beta != 0: cuBLASLt's Hopper kernels round
//     alpha acc + beta C of a 16-bit C more than once, see product()) goes through an f32
//     workspace, holding C widened when beta != 0, rounded into C once at the end. With an f32 D,
//     or a 16-bit D and beta 0, cuBLASLt rounds once, so every 16-bit output is rounded exactly
//     once, as on the CPU.
// linear_forward's bias: the cuBLASLt BIAS epilogue when the bias has D's dtype (D = C or the f32
// workspace), else D is preloaded with the bias broadcast over rows (exact: D is f32 or of the
// bias's dtype) and the product runs with beta 1. Either way the bias is added in f32 before the
// one rounding of a 16-bit y.
//
// Determinism: for a fixed shape, dtypes, alignments and device the algorithm is the heuristic's
// first choice, cached, so every call runs the same kernels; split-K is restricted to
// CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE (see kReductionSchemes). db is a fixed-order column sum
// (gemm.cu).
#include <cublasLt.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/device_caps.hpp"
#include "framework/backend/math_mode.hpp"
#include "framework/backend/cuda/ops/elementwise.hpp"
#include "framework/backend/cuda/ops/gemm.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/core/error.hpp"

namespace strata::cuda_ops {


namespace {

// cublasLtMatmul's workspace: 32 MiB (what NVIDIA recommends for Hopper), one per (device, host
// thread), allocated once with cudaMalloc and kept until the thread exits. The memory ledger does
// not see it (yet): it is outside the tiers' accounting. When the allocation fails the products run
// without a workspace (algorithms that need none).
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

// Split-K reduction schemes the heuristic may pick (cublasLtReductionScheme_t), besides NONE (no
// split-K: one dot product per output element in one sequence, always allowed):
//   COMPUTE_TYPE  partial sums are kept in f32 (the compute type) in the workspace and added by a
//                 separate step in a fixed order: deterministic, and a 16-bit C is rounded once.
// Excluded:
//   INPLACE       accumulates the partials in the output buffer in the OUTPUT type, serialised by
//                 counters: each partial of a 16-bit C would be rounded to 16 bits (not the CPU's
//                 one rounding), and its order rests on inter-block synchronisation;
//   OUTPUT_TYPE   partials kept in the output type: a 16-bit C would be rounded per partial.
// Each algorithm (split count included) is fixed per shape once chosen (the cache below), so the
// sums run in the same order on every call.
constexpr std::uint32_t kReductionSchemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;

void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("cuda", "{} failed: {} ({})", what, cublasLtGetStatusString(st),
         cublasLtGetStatusName(st));
}

cudaDataType_t cuda_type(DT t) {
  switch (t) {
    case DT::bf16:
      return CUDA_R_16BF;
    case DT::f16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

// The largest power of two (at most 256) that divides the address: what the heuristic is told of
// each buffer's alignment (it assumes 256 bytes otherwise).
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al != 0) al >>= 1;
  return al;
}

// Makes `device` current for the scope (cuBLASLt, cudaMalloc and the events act on the current
// device), restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&prev_), "cudaGetDevice");
    if (prev_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// The algorithm chosen for one product description (nullopt: the heuristic offered none).
struct Algo {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspace_bytes = 0;
};
// M, N, K, ta, tb, operand dtype, D dtype, compute type, bias epilogue (0 none, else bias
// alignment), alignments of A, B, D.
using AlgoKey = std::array<std::int64_t, 12>;
constexpr std::size_t kMaxCachedAlgos = 4096;

// One cuBLASLt handle and workspace per (device, host thread), created on first use and kept
// until the thread exits; the algorithm cache lives with them.
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  int major = 0;  // compute capability major version of the device
  // The workspace is shared by the products this thread queues on the device, whatever their
  // stream: `last_use` is recorded after each product that used it, on `last_stream`, and a
  // product on another stream first waits for it (no two products use it at the same time).
  cudaEvent_t last_use = nullptr;
  cudaStream_t last_stream = nullptr;
  std::map<AlgoKey, std::optional<Algo>> algos;

  LtContext() = default;
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;
  ~LtContext() {
    // At thread or process exit; errors are ignored (the runtime may already be shutting down).
    if (last_use) cudaEventDestroy(last_use);
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }
};

// The context of `device` for this thread; `device` must be current (DeviceGuard).
LtContext& lt_context(int device) {
  thread_local std::map<int, std::unique_ptr<LtContext>> contexts;
  std::unique_ptr<LtContext>& slot = contexts[device];
  if (slot) return *slot;
  auto ctx = std::make_unique<LtContext>();
  check_cuda(device_cc_major(device, &ctx->major),
             "cudaDeviceGetAttribute(compute capability)");
  check_lt(cublasLtCreate(&ctx->handle), "cublasLtCreate");
  check_cuda(cudaEventCreateWithFlags(&ctx->last_use, cudaEventDisableTiming), "cudaEventCreate");
  if (cudaMalloc(&ctx->workspace, kWorkspaceBytes) == cudaSuccess) {
    ctx->workspace_bytes = kWorkspaceBytes;
  } else {
    cudaGetLastError();  // clear the failed allocation: run without a workspace
    ctx->workspace = nullptr;
  }
  slot = std::move(ctx);
  return *slot;
}

// RAII owners of the cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p) cublasLtMatmulPreferenceDestroy(p);
  }
};

// One product on raw device pointers, row-major: D[M,N] = alpha op(A) op(B) + beta D (+ bias[N]
// over every row when `bias`), A [M,K] ([K,M] when ta), B [K,N] ([N,K] when tb), A and B of
// dtype t, D of dtype d (f32, or t when t is 16-bit), the bias of dtype d. M, N, K > 0.
struct LtCall {
  std::int64_t M = 0, N = 0, K = 0;
  bool ta = false, tb = false;
  DT t = DT::f32, d = DT::f32;
  const void* A = nullptr;
  const void* B = nullptr;
  void* D = nullptr;
  const void* bias = nullptr;
};

// A described product and its algorithm. ok() is false when the heuristic offers no algorithm
// for it (nothing is queued then; the caller takes another path).
class LtMatmul {
 public:
  LtMatmul(LtContext& ctx, const LtCall& c) : ctx_(ctx), c_(c) {
    // TF32 exists from sm_80 on.
    const bool tf32 = c.t == DT::f32 && allow_tf32() && ctx.major >= 8;
    const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check_lt(cublasLtMatmulDescCreate(&desc_.d, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    // cuBLASLt's A is our B, its B our A (see the top of the file).
    const cublasOperation_t op_a = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(
        cublasLtMatmulDescSetAttribute(desc_.d, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
    check_lt(
        cublasLtMatmulDescSetAttribute(desc_.d, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        "cublasLtMatmulDescSetAttribute(TRANSB)");
    if (c.bias) {
      // D's rows (cuBLASLt's, our columns) get bias[row]; the bias has D's dtype (the default
      // of CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE). Set before the heuristic: it reads the
      // pointer's alignment.
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      check_lt(
          cublasLtMatmulDescSetAttribute(desc_.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
      check_lt(cublasLtMatmulDescSetAttribute(desc_.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias,
                                              sizeof c.bias),
               "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    }
    // Column-major layouts of the stored matrices: our row-major B [K,N] is [N,K] ld N (op N),
    // [N,K] is [K,N] ld K (op T); A [M,K] is [K,M] ld K (op N), [K,M] is [M,K] ld M (op T);
    // D [M,N] is [N,M] ld N.
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    check_lt(cublasLtMatrixLayoutCreate(&la_.l, cuda_type(c.t), c.tb ? u(c.K) : u(c.N),
                                        c.tb ? u(c.N) : u(c.K), c.tb ? c.K : c.N),
             "cublasLtMatrixLayoutCreate(B)");
    check_lt(cublasLtMatrixLayoutCreate(&lb_.l, cuda_type(c.t), c.ta ? u(c.M) : u(c.K),
                                        c.ta ? u(c.K) : u(c.M), c.ta ? c.M : c.K),
             "cublasLtMatrixLayoutCreate(A)");
    check_lt(cublasLtMatrixLayoutCreate(&ld_.l, cuda_type(c.d), u(c.N), u(c.M), c.N),
             "cublasLtMatrixLayoutCreate(C)");

    const std::uint32_t al_a = alignment_of(c.A), al_b = alignment_of(c.B),
                        al_d = alignment_of(c.D);
    const AlgoKey key{c.M,
                      c.N,
                      c.K,
                      c.ta,
                      c.tb,
                      static_cast<std::int64_t>(c.t),
                      static_cast<std::int64_t>(c.d),
                      static_cast<std::int64_t>(compute),
                      c.bias ? alignment_of(c.bias) : 0,
                      al_a,
                      al_b,
                      al_d};
    const auto it = ctx.algos.find(key);
    if (it != ctx.algos.end()) {
      algo_ = it->second;
      return;
    }
    algo_ = heuristic(al_a, al_b, al_d);
    // A configuration without algorithms is remembered too; a failure of another kind (out of
    // host memory, ...) is not.
    if (algo_ || status_ == CUBLAS_STATUS_SUCCESS || status_ == CUBLAS_STATUS_NOT_SUPPORTED ||
        status_ == CUBLAS_STATUS_INVALID_VALUE) {
      if (ctx.algos.size() >= kMaxCachedAlgos) ctx.algos.clear();
      ctx.algos.emplace(key, algo_);
    }
  }

  bool ok() const { return algo_.has_value(); }
  // Why there is no algorithm: the heuristic's status (SUCCESS: it returned none).
  cublasStatus_t status() const { return status_; }

  // Queues the product on s (D = alpha op(A) op(B) + beta D (+ bias)); requires ok().
  void run(float alpha, float beta, cudaStream_t s) {
    const bool uses_workspace = algo_->workspace_bytes > 0;
    if (uses_workspace && ctx_.last_stream != nullptr && ctx_.last_stream != s)
      check_cuda(cudaStreamWaitEvent(s, ctx_.last_use, 0), "cudaStreamWaitEvent");
    // cuBLASLt's C and D are the same buffer and layout (in place; C is not read when beta is 0).
    check_lt(cublasLtMatmul(ctx_.handle, desc_.d, &alpha, c_.B, la_.l, c_.A, lb_.l, &beta, c_.D,
                            ld_.l, c_.D, ld_.l, &algo_->algo,
                            uses_workspace ? ctx_.workspace : nullptr, algo_->workspace_bytes, s),
             "cublasLtMatmul");
    if (uses_workspace) {
      check_cuda(cudaEventRecord(ctx_.last_use, s), "cudaEventRecord");
      ctx_.last_stream = s;
    }
  }

 private:
  // The heuristic's first algorithm for this description, or nullopt when it has none.
  std::optional<Algo> heuristic(std::uint32_t al_a, std::uint32_t al_b, std::uint32_t al_d) {
    Preference pref;
    check_lt(cublasLtMatmulPreferenceCreate(&pref.p), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t ws = ctx_.workspace_bytes;
    const std::uint32_t schemes = kReductionSchemes;
    const auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, std::size_t n) {
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref.p, attr, v, n),
               "cublasLtMatmulPreferenceSetAttribute");
    };
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes);
    // cuBLASLt's A is our B and its B our A; C and D are both our C.
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_b, sizeof al_b);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_a, sizeof al_a);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    status_ = cublasLtMatmulAlgoGetHeuristic(ctx_.handle, desc_.d, la_.l, lb_.l, ld_.l, ld_.l,
                                             pref.p, 1, &result, &count);
    // A failed query (NOT_SUPPORTED: no heuristic for this configuration, e.g. an epilogue a type
    // combination lacks) or no result: the caller takes another path, or reports status_.
    if (status_ != CUBLAS_STATUS_SUCCESS || count < 1) return std::nullopt;
    if (result.state != CUBLAS_STATUS_SUCCESS) {
      status_ = result.state;
      return std::nullopt;
    }
    if (result.workspaceSize > ctx_.workspace_bytes) return std::nullopt;  // (cannot happen)
    return Algo{result.algo, result.workspaceSize};
  }

  LtContext& ctx_;
  LtCall c_;
  MatmulDesc desc_;
  Layout la_, lb_, ld_;  // cuBLASLt's A (our B), B (our A), C = D
  std::optional<Algo> algo_;
  cublasStatus_t status_ = CUBLAS_STATUS_SUCCESS;
};

// An operand of the op's products: the tensor in its own dtype and, made on first use and kept
// for the op's other products, its f32 widening.
class Operand {
 public:
  explicit Operand(const Tensor& t) : t_(t) {}
  DT dtype() const { return dt(t_); }
  const void* raw() const { return t_.raw(); }
  const float* f32() {
    if (!wide_) wide_.emplace(t_);  // the tensor itself when f32, else a widened workspace
    return wide_->get();
  }

 private:
  Tensor t_;
  std::optional<In32> wide_;
};

// C[M,N] = alpha op(A) op(B) + beta C (+ bias[N] on every row when bias is defined, with beta 0),
// for operands of any float dtypes; `what` names the op in errors. Queued on C's stream.
void product(const char* what, Operand& A, bool ta, Operand& B, bool tb, const Tensor& C,
             float alpha, float beta, const Tensor& bias, std::int64_t M, std::int64_t N,
             std::int64_t K) {
  STRATA_CHECK(!bias.defined() || beta == 0.0f, "cuda", "{}: a bias with beta {}", what, beta);
  if (M == 0 || N == 0) return;  // an empty C
  const cudaStream_t s = stream_of(C);
  const int device = C.device().index;
  DeviceGuard guard(device);
  const DT ct = dt(C);
  const std::int64_t n = M * N;

  if (K == 0) {
    // An empty reduction: C = beta C (+ bias). beta 0 overwrites (C may hold anything, NaN).
    if (bias.defined()) {
      launch_bias_rows(C.raw(), ct, bias.raw(), dt(bias), M, N, s);
    } else if (beta == 0.0f) {
      check_cuda(cudaMemsetAsync(C.raw(), 0, C.nbytes(), s),
                 "cudaMemsetAsync");  // +0 in every dtype
    } else if (beta != 1.0f) {
      launch_scale(C.raw(), ct, beta, n, s);
    }
    check_launch(what);
    return;
  }

  LtContext& ctx = lt_context(device);
  // 16-bit operands run directly when A and B share the dtype and the device has the kernels;
  // which operands are widened and whether D is an f32 workspace is gemm_plan's decision
  // (workspace_sizes.hpp), which the memory plan of a GPU job charges too.
  const GemmPlan plan = gemm_plan(A.dtype(), B.dtype(), ct, beta, bias.defined(),
                                  bias.defined() ? dt(bias) : DT::f32, ctx.major >= 8);
  bool direct = plan.direct;
  for (;;) {
    const DT t = direct ? A.dtype() : DT::f32;
    const void* a = direct ? A.raw() : static_cast<const void*>(A.f32());
    const void* b = direct ? B.raw() : static_cast<const void*>(B.f32());
    // D: C itself when cuBLASLt writes C's dtype from t operands (f32, or t itself), a bias can
    // be added exactly in it (a bias of another dtype needs f32) and a 16-bit C is not read
    // (beta 0); else an f32 workspace. A 16-bit C with beta != 0 goes through the workspace
    // because cuBLASLt's Hopper kernels do not add beta C to alpha acc in f32 before the one
    // rounding: on an H200 (2026-11-28) a quarter of a bf16 or f16 C accumulated in place
    // (dW += dy^T x, 128 x 384 from 128 rows) was one unit in the last place off the correctly
    // rounded f32 sum, while the same product with beta 0 was exact.
    // (The fallback below, a 16-bit product the heuristic has no algorithm for, widens the
    // operands after all: the one path the plan does not foresee.)
    const bool c_is_d = direct ? !plan.f32_d
                               : !gemm_plan(DT::f32, DT::f32, ct, beta, bias.defined(),
                                            bias.defined() ? dt(bias) : DT::f32, false)
                                      .f32_d;
    Tensor ws;
    void* d = C.raw();
    DT dd = ct;
    if (!c_is_d) {
      ws = workspace(C, C.shape(), DType::f32);
      d = ws.raw();
      dd = DT::f32;
    }
    LtCall call{
        .M = M, .N = N, .K = K, .ta = ta, .tb = tb, .t = t, .d = dd, .A = a, .B = b, .D = d};
    // The bias epilogue takes a bias of D's dtype; when it has no algorithm, or the bias has
    // another dtype, D is preloaded with the bias.
    std::optional<LtMatmul> mm;
    bool epilogue = false;
    if (bias.defined() && dt(bias) == dd) {
      LtCall with_bias = call;
      with_bias.bias = bias.raw();
      mm.emplace(ctx, with_bias);
      epilogue = mm->ok();
      if (!epilogue) mm.reset();
    }
    if (!mm) {
      mm.emplace(ctx, call);
      if (!mm->ok()) {
        if (direct) {  // no 16-bit algorithm: widen to f32 and try again
          direct = false;
          continue;
        }
        fail("cuda", "{}: cuBLASLt has no algorithm for the f32 product M={} N={} K={} ({})", what,
             M, N, K,
             mm->status() == CUBLAS_STATUS_SUCCESS ? "the heuristic returned none"
                                                   : cublasLtGetStatusString(mm->status()));
      }
    }
    float b_eff = beta;
    if (!c_is_d && beta != 0.0f) launch_convert(C.raw(), ct, d, DT::f32, n, s);
    if (bias.defined() && !epilogue) {
      launch_bias_rows(d, dd, bias.raw(), dt(bias), M, N, s);  // exact: dd is f32 or the bias's
      b_eff = 1.0f;
    }
    check_launch(what);
    mm->run(alpha, b_eff, s);
    if (!c_is_d) {
      launch_convert(d, DT::f32, C.raw(), ct, n, s);  // the one rounding of a 16-bit C
      check_launch(what);
    }
    return;
  }
}

}  // namespace

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool trans_a, bool trans_b,
            float alpha, float beta) {
  const std::int64_t M = C.dim(0), N = C.dim(1), K = trans_a ? A.dim(0) : A.dim(1);
  Operand a(A), b(B);
  product("matmul", a, trans_a, b, trans_b, C, alpha, beta, Tensor(), M, N, K);
}

void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y) {
  // y[N,out] = x[N,in] W[out,in]^T + b
  const std::int64_t N = x.dim(0), in = x.dim(1), out = W.dim(0);
  Operand xo(x), wo(W);
  product("linear_forward", xo, false, wo, true, y, 1.0f, 0.0f, b, N, out, in);
}

void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db) {
  const std::int64_t N = x.dim(0), in = x.dim(1), out = W.dim(0);
  Operand xo(x), wo(W), dyo(dy);
  // dx[N,in] = dy[N,out] W[out,in] (overwritten).
  if (dx.defined())
    product("linear_backward", dyo, false, wo, false, dx, 1.0f, 0.0f, Tensor(), N, in, out);
  // dW[out,in] += dy^T x with beta 1: an f32 dW accumulates in place; a 16-bit one gets
  // round(dW + product) with the sum in f32 (in the f32 workspace product() goes through),
  // rounded once: the CPU's Acc32 commit (product with beta 0, then
  // dW = round(dW + product)) does the same f32 add and the same one rounding.
  product("linear_backward", dyo, true, xo, false, dW, 1.0f, 1.0f, Tensor(), out, in, N);
  // db[out] += column sums of dy, fixed order, added in and rounded once.
  if (db.defined() && N > 0 && out > 0) {
    const cudaStream_t s = stream_of(dy);
    DeviceGuard guard(dy.device().index);
    const ColumnSumPlan plan = column_sum_plan(N, out);
    Tensor scratch = workspace(dy, Shape{plan.strips * out}, DType::f32);
    launch_column_sums(db.raw(), dt(db), dy.raw(), dt(dy), N, out,
                       static_cast<float*>(scratch.raw()), s);
    check_launch("linear_backward");
  }
}

}  // namespace strata::cuda_ops
