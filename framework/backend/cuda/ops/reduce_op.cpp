// The reductions on CUDA tensors (reduce.cu has the kernels) and read_back, with which the CUDA
// ops that return a host value fetch it. These ops wait for their stream (only that stream, never
// the whole device): accepted for now, as the caller needs the value on the host at once.
#include <cstring>

#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/reduce.hpp"
#include "framework/backend/cuda_runtime.hpp"

namespace strata::cuda_ops {
namespace {

// A small page-locked host buffer per host thread, allocated on first use and freed when the
// thread exits (thread_local destructors run before the CUDA runtime's own teardown at exit; an
// error there is ignored). Portable: pinned for every device's context. Each use is finished
// (the stream synchronised) before read_back returns, so one buffer per thread suffices.
constexpr std::size_t kPinnedBytes = 64;

struct PinnedBuffer {
  void* p = nullptr;
  bool tried = false;
  ~PinnedBuffer() {
    if (p) static_cast<void>(cudaFreeHost(p));
  }
  void* get() {
    if (!tried) {
      tried = true;
      if (cudaHostAlloc(&p, kPinnedBytes, cudaHostAllocPortable) != cudaSuccess) {
        p = nullptr;
        static_cast<void>(cudaGetLastError());  // not fatal: fall back to pageable memory
      }
    }
    return p;
  }
};

}  // namespace

void read_back(void* dst, const void* src, std::size_t bytes, cudaStream_t s, const char* what) {
  thread_local PinnedBuffer pinned;
  void* pin = bytes <= kPinnedBytes ? pinned.get() : nullptr;
  void* host = pin ? pin : dst;
  check_cuda(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s), what);
  cuda::note_host_wait();
  check_cuda(cudaStreamSynchronize(s), what);
  if (pin) std::memcpy(dst, pin, bytes);
}

// Sum of squares in double with a fixed order (reduce.hpp): the same bits run after run. The
// order differs from the CPU's (kChunk-element chunks with 8 interleaved accumulators), which
// changes only the last bits of the double.
double sum_squares(const Tensor& x) {
  const cudaStream_t s = stream_of(x);
  const std::int64_t n = x.numel();
  if (n == 0) return 0.0;
  Tensor partials = workspace(x, Shape{sum_squares_partials(n, dt(x))}, DType::f64);
  Tensor result = workspace(x, Shape{1}, DType::f64);
  launch_sum_squares(x.raw(), dt(x), n, static_cast<double*>(partials.raw()),
                     static_cast<double*>(result.raw()), s);
  check_launch("sum_squares");
  double host = 0.0;
  read_back(&host, result.raw(), sizeof(host), s, "sum_squares");
  return host;
}

// Any ±inf or NaN in x's own dtype (an f32 1e5 is finite; the same value stored as f16 is inf).
bool has_inf_or_nan(const Tensor& x) {
  const cudaStream_t s = stream_of(x);
  const std::int64_t n = x.numel();
  if (n == 0) return false;
  Tensor flag = workspace(x, Shape{1}, DType::i32);
  check_cuda(cudaMemsetAsync(flag.raw(), 0, sizeof(int), s), "has_inf_or_nan: cudaMemsetAsync");
  launch_has_inf_or_nan(x.raw(), dt(x), n, static_cast<int*>(flag.raw()), s);
  check_launch("has_inf_or_nan");
  int host = 0;
  read_back(&host, flag.raw(), sizeof(host), s, "has_inf_or_nan");
  return host != 0;
}

}  // namespace strata::cuda_ops
