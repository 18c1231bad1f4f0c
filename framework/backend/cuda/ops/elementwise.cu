// Elementwise kernels: conversions between float dtypes (bitwise the CPU's rounding), adds and
// scaling in f32 with one rounding of a 16-bit result. Memory-bound: one pass through map8.cuh
// (the dtypes as template arguments, 16-byte accesses, 8 elements a thread).
#include "framework/backend/cuda/ops/map8.cuh"
#include "framework/backend/cuda/ops/elementwise.hpp"

namespace strata::cuda_ops {
namespace {

struct Identity {
  __device__ float operator()(float v) const { return v; }
};
struct Add {
  __device__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};
struct Scale {
  float s;
  __device__ float operator()(float a) const { return __fmul_rn(a, s); }
};

}  // namespace

void launch_convert(const void* src, DT sdt, void* dst, DT ddt, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (sdt == ddt) {
    cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * (sdt == DT::f32 ? 4 : 2),
                    cudaMemcpyDeviceToDevice, s);
    return;
  }
  with_dt(sdt, [&](auto S) {
    with_dt(ddt, [&](auto D) {
      launch_map<decltype(D)::value>(Identity{}, dst, n, s, In<decltype(S)::value>{src});
    });
  });
}

void launch_accumulate(void* dst, DT ddt, const float* add, std::int64_t n, cudaStream_t s) {
  with_dt(ddt, [&](auto D) {
    constexpr DT d = decltype(D)::value;
    launch_map<d>(Add{}, dst, n, s, In<d>{dst}, In<DT::f32>{add});
  });
}

void launch_add(const void* a, DT adt, const void* b, DT bdt, void* out, DT odt, std::int64_t n,
                cudaStream_t s) {
  with_dt(adt, [&](auto A) {
    with_dt(bdt, [&](auto B) {
      with_dt(odt, [&](auto O) {
        launch_map<decltype(O)::value>(Add{}, out, n, s, In<decltype(A)::value>{a},
                                       In<decltype(B)::value>{b});
      });
    });
  });
}

void launch_scale(void* a, DT adt, float scale, std::int64_t n, cudaStream_t s) {
  with_dt(adt, [&](auto A) {
    constexpr DT d = decltype(A)::value;
    launch_map<d>(Scale{scale}, a, n, s, In<d>{a});
  });
}

}  // namespace strata::cuda_ops
