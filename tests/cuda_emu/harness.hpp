// The test harness of test_cuda_emu: a registry of tests (EMU_TEST), float arrays of a runtime
// dtype on the host and in (emulated) device memory, comparisons that say where they fail, and
// run_orders, which runs a launch under every scheduling order and checks the bits agree.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/core/dtype.hpp"

namespace cuda_emu_test {

using strata::DType;
using strata::cuda_ops::DT;

// ---- registry ----
struct TestCase {
  const char* group;  // the file's concern: a ctest entry each
  const char* name;
  void (*fn)();
};
std::vector<TestCase>& registry();
struct Register {
  Register(const char* group, const char* name, void (*fn)()) {
    registry().push_back({group, name, fn});
  }
};
#define EMU_TEST(group, name)                                                  \
  static void emu_test_##name();                                               \
  static ::cuda_emu_test::Register emu_reg_##name(group, #name, emu_test_##name); \
  static void emu_test_##name()

// ---- failures ----
// Prints "FAIL <test>: <message>" and counts a failure.
void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int failures();
// Counts a check (for the summary).
void checked(long long n = 1);
// A label for messages: printf into a string.
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
// Fails unless the last launch / runtime call succeeded and the emulator reported nothing new.
void expect_ok(const std::string& what, cudaError_t e = cudaSuccess);

// Fails unless the emulator reported exactly n errors since the last check (an intended misuse).
void expect_emu_errors(const std::string& what, long long n);

// ---- dtypes ----
const char* name(DT d);
DType dtype(DT d);
std::size_t size_of(DT d);
constexpr DT kFloatDTs[3] = {DT::f32, DT::bf16, DT::f16};

// ---- host arrays of a float dtype ----
struct HostArr {
  DT dt = DT::f32;
  std::int64_t n = 0;
  std::vector<unsigned char> bytes;
  HostArr() = default;
  HostArr(DT d, std::int64_t count) : dt(d), n(count), bytes(static_cast<std::size_t>(count) * size_of(d)) {}
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  float get(std::int64_t i) const { return strata::cuda_ops::load(data(), dt, i); }
  void set(std::int64_t i, float v) { strata::cuda_ops::store(data(), dt, i, v); }
  std::uint32_t bits(std::int64_t i) const;
  std::vector<float> f32() const;  // widened
};
// n values ~ N(0, scale^2) (rounded to dt).
HostArr random_arr(DT dt, std::int64_t n, std::mt19937& g, float scale = 1.0f);
// The same values in another dtype (rounded once).
HostArr convert_arr(const HostArr& a, DT to);

// ---- device memory ----
// cudaMalloc'ed bytes (exactly: the sanitizer sees overruns), freed on destruction.
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(std::size_t bytes);
  explicit DevBuf(const HostArr& a);  // a copy of a
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DevBuf& operator=(DevBuf&& o) noexcept;
  ~DevBuf();
  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n, std::size_t offset = 0);
  void upload(const HostArr& a, std::size_t offset = 0) { upload(a.data(), a.bytes.size(), offset); }
  void download(void* dst, std::size_t n, std::size_t offset = 0) const;
  HostArr download(DT dt, std::int64_t n, std::size_t offset = 0) const;
  std::vector<unsigned char> raw() const;

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// ---- scheduling orders ----
// Runs `run` (upload the inputs, launch, return the outputs' bytes) under the forward, reverse
// and random orders of blocks, warps and lanes; fails unless all three return the same bytes.
// Returns the forward run's. `orders` 2: forward and random only (for the largest cases).
std::vector<unsigned char> run_orders(const std::string& what,
                                      const std::function<std::vector<unsigned char>()>& run,
                                      int orders = 3);
// Helpers to pack outputs into one byte vector.
void append(std::vector<unsigned char>& out, const std::vector<unsigned char>& more);
void append(std::vector<unsigned char>& out, const void* p, std::size_t n);
HostArr arr_from(const std::vector<unsigned char>& bytes, std::size_t offset, DT dt, std::int64_t n);

// ---- comparisons ----
// Bitwise equality (a NaN equals any NaN when nan_any: NaN payloads are not part of the
// contracts here).
bool expect_bits(const std::string& what, const HostArr& got, const HostArr& ref,
                 bool nan_any = true);
// |got - ref| <= rtol * |ref| + atol (+ one unit in the last place of got's dtype at ref when it
// is 16-bit: a different f32 value may round to the neighbour); NaN matches NaN, inf itself.
bool expect_close(const std::string& what, const HostArr& got, const std::vector<double>& ref,
                  double rtol, double atol = 0.0);
bool expect_close(const std::string& what, double got, double ref, double rtol, double atol = 0.0);
// |got[i] - ref[i]| <= tol[i] (+ one unit in the last place of a 16-bit got at ref[i]).
bool expect_within(const std::string& what, const HostArr& got, const std::vector<double>& ref,
                   const std::vector<double>& tol);
// One unit in the last place of dtype dt at |v|.
double ulp(DT dt, double v);

}  // namespace cuda_emu_test
