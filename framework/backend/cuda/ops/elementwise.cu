// Elementwise kernels: conversions between float dtypes (bitwise the CPU's rounding), adds and
// scaling in f32 with one rounding of a 16-bit result. Memory-bound: one pass, grid-stride loops.
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/elementwise.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;

unsigned grid(std::int64_t n) { return grid_for(n, kThreads); }

__global__ void convert_kernel(const void* src, DT sdt, void* dst, DT ddt, std::int64_t n) {
  STRATA_GRID_STRIDE(i, n) store(dst, ddt, i, load(src, sdt, i));
}

__global__ void accumulate_kernel(void* dst, DT ddt, const float* add, std::int64_t n) {
  STRATA_GRID_STRIDE(i, n) store(dst, ddt, i, __fadd_rn(load(dst, ddt, i), add[i]));
}

__global__ void add_kernel(const void* a, DT adt, const void* b, DT bdt, void* out, DT odt,
                           std::int64_t n) {
  STRATA_GRID_STRIDE(i, n) store(out, odt, i, __fadd_rn(load(a, adt, i), load(b, bdt, i)));
}

__global__ void scale_kernel(void* a, DT adt, float s, std::int64_t n) {
  STRATA_GRID_STRIDE(i, n) store(a, adt, i, __fmul_rn(load(a, adt, i), s));
}

}  // namespace

void launch_convert(const void* src, DT sdt, void* dst, DT ddt, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (sdt == ddt) {
    cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * (sdt == DT::f32 ? 4 : 2),
                    cudaMemcpyDeviceToDevice, s);
    return;
  }
  convert_kernel<<<grid(n), kThreads, 0, s>>>(src, sdt, dst, ddt, n);
}

void launch_accumulate(void* dst, DT ddt, const float* add, std::int64_t n, cudaStream_t s) {
  if (n > 0) accumulate_kernel<<<grid(n), kThreads, 0, s>>>(dst, ddt, add, n);
}

void launch_add(const void* a, DT adt, const void* b, DT bdt, void* out, DT odt, std::int64_t n,
                cudaStream_t s) {
  if (n > 0) add_kernel<<<grid(n), kThreads, 0, s>>>(a, adt, b, bdt, out, odt, n);
}

void launch_scale(void* a, DT adt, float scale, std::int64_t n, cudaStream_t s) {
  if (n > 0) scale_kernel<<<grid(n), kThreads, 0, s>>>(a, adt, scale, n);
}

}  // namespace strata::cuda_ops
