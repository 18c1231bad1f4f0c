// GELU (tanh approximation) forward/backward over fixed chunks of the flat array.
#include <cstddef>

#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"

namespace strata::cpu {
namespace {
constexpr std::int64_t kGeluChunk = 16384;  // elements per task (a multiple of every vector width)
}  // namespace

void gelu_forward(const float* x, float* y, std::size_t n) {
  const auto& rk = detail::row_kernels();
  detail::parallel_chunks(static_cast<std::int64_t>(n), kGeluChunk,
                          [&](std::int64_t i0, std::int64_t i1) {
                            rk.gelu_forward(x + i0, y + i0, static_cast<std::size_t>(i1 - i0));
                          });
}

void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) {
  const auto& rk = detail::row_kernels();
  detail::parallel_chunks(
      static_cast<std::int64_t>(n), kGeluChunk, [&](std::int64_t i0, std::int64_t i1) {
        rk.gelu_backward(x + i0, dy + i0, dx + i0, static_cast<std::size_t>(i1 - i0));
      });
}

}  // namespace strata::cpu
