// The 1-bit optimizers' op entries on the CUDA table: set (the table is complete) but without
// kernels yet, each fails in one line naming the optimizer, the op and the fix, without touching
// its operands (called here directly with host tensors: no GPU needed). Skipped in a build
// without CUDA kernels (no CUDA table).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "framework/backend/ops/op_table.hpp"
#include "framework/core/error.hpp"

namespace strata::ops::test {
namespace {

TEST(OneBitOpEntries, TheCudaTableFailsInOneLineNamingTheOptimizerAndTheFix) {
  const OpTable* t = cuda_op_table();
  if (!t) GTEST_SKIP() << "this build has no CUDA kernels";
  EXPECT_NO_THROW(check_complete(*t));
  const Tensor x = Tensor::zeros(Shape{4}, DType::f32), s = Tensor::zeros(Shape{3}, DType::f64);
  const optim::OneBitAdamHyper a;
  const optim::OneBitLambHyper l;
  const struct {
    const char* optimizer;
    const char* op;
    std::function<void()> call;
  } calls[] = {
      {"OneBitAdam", "onebit_momentum", [&] { t->onebit_momentum(x, x, a, 1.0f); }},
      {"OneBitAdam", "onebit_apply", [&] { t->onebit_apply(x, x, x, a, 1e-3, Tensor()); }},
      {"OneBitLamb", "onebit_lamb_sumsq", [&] { t->onebit_lamb_sumsq(x, s); }},
      {"OneBitLamb", "onebit_lamb_momentum",
       [&] { t->onebit_lamb_momentum(x, x, x, l, 1.0f, 1.0); }},
      {"OneBitLamb", "onebit_lamb_after_exchange",
       [&] { t->onebit_lamb_after_exchange(x, x, x, x, x, l, 0.0, 1.0, s); }},
      {"OneBitLamb", "onebit_lamb_apply",
       [&] { t->onebit_lamb_apply(x, x, x, l, 0.0, 1e-3, Tensor()); }},
  };
  for (const auto& c : calls) {
    try {
      c.call();
      ADD_FAILURE() << c.op << " ran on the CUDA table";
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_EQ(what.rfind(std::string("[ops] ") + c.optimizer + " has no CUDA kernels yet (" + c.op,
                           0),
                0u)
          << what;
      EXPECT_NE(what.find("strata.device \"cpu\""), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace strata::ops::test
