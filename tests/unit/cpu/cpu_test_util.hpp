// Shared helpers for the CPU kernel tests: thread-count and instruction-set switching, plus the
// numeric helpers (random data, tolerances, finite differences) and double references of
// tests/support, visible unqualified.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "tests/support/numeric.hpp"
#include "tests/support/reference_math.hpp"

namespace strata::cpu::test {

using namespace ::strata::test;

// Sets the kernel thread count for a scope, restoring the previous one after.
class ThreadScope {
 public:
  explicit ThreadScope(int n) : prev_(num_threads()) { set_num_threads(n); }
  ~ThreadScope() { set_num_threads(prev_); }

 private:
  int prev_;
};

// Test fixture parameterised by instruction set: every test runs once per available ISA.
class IsaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { detail::force_isa(GetParam()); }
  void TearDown() override { detail::force_isa(""); }
};

inline std::string isa_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace strata::cpu::test

#define STRATA_INSTANTIATE_ISA(Suite)                                                    \
  INSTANTIATE_TEST_SUITE_P(Isa, Suite,                                                   \
                           ::testing::ValuesIn(::strata::cpu::detail::available_isas()), \
                           ::strata::cpu::test::isa_name)
