// Every harness case on every backend whose op table exists, in every dtype combination, against
// the f32 CPU reference (op_harness.hpp); and every op of the table has a case.
#include <set>

#include "tests/unit/ops/op_entries.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

class OpHarness : public ::testing::TestWithParam<std::string> {};

TEST_P(OpHarness, MatchesTheF32CpuReference) {
  const OpCase& c = find_case(GetParam());
  const std::vector<Tensor> host = draw(c);
  int compared = 0;
  for (const Backend& b : backends()) {
    for (const Combo& combo : combos_of(c)) {
      SCOPED_TRACE(c.name + " on " + b.name + ", dtypes " + combo.name);
      compared += check_case(c, host, combo, b);
    }
  }
  EXPECT_GT(compared, 0);
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const OpCase& c : all_cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpHarness, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(OpHarnessBackends, CudaWhenTheBuildHasItsTableAndAGpu) {
  const std::string why = cuda_skip_reason();
  if (!why.empty()) GTEST_SKIP() << "cuda backend not tested: " << why;
  ASSERT_EQ(backends().size(), 2u);
  EXPECT_EQ(backends()[1].device, Device::cuda(0));
}

TEST(OpHarnessBackends, EveryOpOfTheTableHasACaseAndNamesAreUnique) {
  std::set<std::string> ops, names;
  for (const OpCase& c : all_cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "two cases named " << c.name;
    for (const Call& call : c.calls) ops.insert(call.op);
  }
  ASSERT_EQ(op_entries().size(), op_table_slots());
  for (const OpEntry& e : op_entries()) EXPECT_TRUE(ops.count(e.name)) << "no case runs " << e.name;
}

}  // namespace
}  // namespace strata::ops::test
