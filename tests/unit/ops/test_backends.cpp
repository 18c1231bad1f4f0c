// Every harness case on every registered backend (one test each, skipped with the reason where the
// backend is unavailable), in every dtype combination, against the f32 CPU reference
// (op_harness.hpp); every op of the table has a case, run in every dtype its operands accept.
#include <set>
#include <tuple>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "tests/unit/ops/op_entries.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

// (backend name, case name)
class OpHarness : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(OpHarness, MatchesTheF32CpuReference) {
  const Backend& b = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(b);
  const OpCase& c = find_case(std::get<1>(GetParam()));
  if (!c.cpu_only.empty() && b.name != "cpu") GTEST_SKIP() << c.name << " on " << b.name << ": " << c.cpu_only;
  const Tensors host = draw(c);
  int compared = 0;
  for (const Combo& combo : combos_of(c)) {
    SCOPED_TRACE(c.name + " on " + b.name + ", dtypes " + combo.name);
    compared += check_case(c, host, combo, b);
  }
  EXPECT_GT(compared, 0);
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const OpCase& c : all_cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpHarness,
                         ::testing::Combine(::testing::ValuesIn(backend_names()),
                                            ::testing::ValuesIn(case_names())),
                         [](const ::testing::TestParamInfo<OpHarness::ParamType>& i) {
                           return backend_param_name(std::get<0>(i.param), std::get<1>(i.param));
                         });

TEST(OpHarnessBackends, TheCpuIsAlwaysTestedAndCudaWhenTheBuildHasItsTableAndAGpu) {
  ASSERT_GE(registered_backends().size(), 2u);
  EXPECT_EQ(backend_named("cpu").device, Device::cpu());
  EXPECT_EQ(backend_named("cpu").unavailable(), "");
  EXPECT_EQ(backend_named("cuda").device, Device::cuda(0));
  EXPECT_EQ(backend_named("cuda").unavailable().empty(),
            cuda_op_table() != nullptr && cuda::device_count() > 0);
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

// What ops:: accepts decides: each operand of each (small) case's calls is given, in turn, each
// dtype (the others as in the case's first combination); every dtype the op accepts for it must
// be one the operand has in some combination the harness runs.
TEST(OpHarnessBackends, EveryOperandRunsInEveryDtypeItsOpAccepts) {
  int accepted = 0;
  for (const OpCase& c : all_cases()) {
    if (c.large) continue;
    const Tensors host = draw(c);
    const std::vector<Combo> combos = combos_of(c);
    Tensors first;
    for (std::size_t i = 0; i < host.size(); ++i)
      first.push_back(host[i].to(combos.front().of(c.tensors[i].group), TensorOptions{}));
    for (const Call& call : c.calls) {
      for (int i : std::set<int>(call.args.begin(), call.args.end())) {
        const Spec& s = c.tensors[static_cast<std::size_t>(i)];
        std::set<DType> runs;
        for (const Combo& combo : combos) runs.insert(combo.of(s.group));
        for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::i32}) {
          Tensors t;
          for (const Tensor& x : first) t.push_back(x.to(x.dtype(), TensorOptions{}));
          t[static_cast<std::size_t>(i)] =
              first[static_cast<std::size_t>(i)].to(dt, TensorOptions{});
          try {
            call.run(t);
          } catch (const Error&) {
            continue;  // not accepted (test_arg_checks checks the refusals)
          }
          ++accepted;
          EXPECT_TRUE(runs.count(dt))
              << c.name << ": " << call.op << " accepts " << s.name << " in " << dtype_name(dt)
              << ", but no combination of the case runs it so";
        }
      }
    }
  }
  EXPECT_GT(accepted, 200);
}

}  // namespace
}  // namespace strata::ops::test
