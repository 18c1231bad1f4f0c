// Portable scalar build of the row kernels: the fallback on CPUs (or architectures) without
// AVX2, and a second implementation the tests check the vector ones against.
#include <bit>
#include <cmath>
#include <cstdint>

#include "framework/backend/cpu/row_kernels.hpp"

namespace strata::cpu::detail {
namespace {

using vf = float;
constexpr std::size_t W = 1;
constexpr const char* kIsaName = "generic";

inline vf vload(const float* p) {
  return *p;
}
inline vf vloadn(const float* p, int n) {
  return n > 0 ? *p : 0.0f;
}
inline vf vloadn_fill(const float* p, int n, float fill) {
  return n > 0 ? *p : fill;
}
inline vf vkeep(vf v, int n) {
  return n > 0 ? v : 0.0f;
}
inline void vstore(float* p, vf v) {
  *p = v;
}
inline void vstoren(float* p, vf v, int n) {
  if (n > 0) *p = v;
}
inline vf vset1(float x) {
  return x;
}
inline vf vadd(vf a, vf b) {
  return a + b;
}
inline vf vsub(vf a, vf b) {
  return a - b;
}
inline vf vmul(vf a, vf b) {
  return a * b;
}
inline vf vdiv(vf a, vf b) {
  return a / b;
}
inline vf vfma(vf a, vf b, vf c) {
  return a * b + c;
}
inline vf vmax(vf a, vf b) {
  return a > b ? a : b;
}
inline vf vmin(vf a, vf b) {
  return a < b ? a : b;
}
inline float vhsum(vf v) {
  return v;
}
inline float vhmax(vf v) {
  return v;
}
inline vf vround(vf v) {
  return std::nearbyint(v);
}
inline vf vpow2n(vf n) {
  const auto e = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127);
  return std::bit_cast<float>(e << 23);
}
inline float s_sqrt(float x) {
  return std::sqrt(x);
}
inline float s_log(float x) {
  return std::log(x);
}

#include "framework/backend/cpu/row_kernels_impl.inc"

}  // namespace

const RowKernels* row_kernels_generic() {
  return &kTable;
}

}  // namespace strata::cpu::detail
