// Export to one consolidated fp32 file under the global names, and import of such a file (or any
// HDF5 file of float datasets) as a step-0 checkpoint; and the model-compatibility check.
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/compat.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/core/half.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;
using testing::throws_with;

TEST(Export, ConsolidatesAllRanksIntoGlobalShapes) {
  TempDir tmp;
  testing::save_toy(tmp / "ck", 12, 3, DType::bf16);
  const ExportResult r = export_consolidated(tmp / "ck", tmp / "model.h5");  // root: uses latest
  EXPECT_EQ(r.step, 12);
  EXPECT_EQ(r.params, 4u);
  EXPECT_EQ(r.elements, 120);
  EXPECT_FALSE(std::filesystem::exists(tmp / "model.h5.tmp"));

  h5::Id f = h5::open_file(tmp / "model.h5");
  EXPECT_EQ(h5::read_attr_string(f.get(), "format"), "strata-export");
  EXPECT_EQ(h5::read_attr_i64(f.get(), "step"), 12);
  EXPECT_EQ(json::parse(h5::read_attr_string(f.get(), "model"))["n_layer"], 1);
  for (const FlatParam& p : testing::toy_params()) {
    h5::Id ds = h5::open_dataset(f.get(), "/" + p.name);
    EXPECT_EQ(h5::dataset_dims(ds.get()), p.shape.dims());
    h5::Id type(H5Dget_type(ds.get()), H5Tclose);
    EXPECT_TRUE(h5::type_matches(type.get(), DType::f32));
    std::vector<float> v(static_cast<std::size_t>(p.shape.numel()));
    h5::read_dataset(ds.get(), DType::f32, v.data());
    for (std::size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(v[i], bf16_to_f32(f32_to_bf16(
                          testing::value_at("param", p.offset + static_cast<std::int64_t>(i)))));
  }
}

TEST(Export, ImportRoundTrip) {
  TempDir tmp;
  testing::save_toy(tmp / "ck", 12, 4);
  export_consolidated(tmp / "ck/step_00000012", tmp / "model.h5");
  const ImportResult ir = import_consolidated(tmp / "model.h5", tmp / "ft");
  EXPECT_EQ(ir.params, 4u);
  EXPECT_TRUE(ir.skipped.empty());
  EXPECT_EQ(read_latest(tmp / "ft"), "step_00000000");
  CheckpointReader orig(tmp / "ck/step_00000012");
  CheckpointReader imp(tmp / "ft/step_00000000");
  EXPECT_EQ(imp.step(), 0);
  EXPECT_EQ(imp.manifest().layout.world, 1);
  EXPECT_EQ(imp.manifest().config, orig.manifest().config);
  ASSERT_EQ(imp.manifest().params.size(), orig.manifest().params.size());
  for (std::size_t i = 0; i < orig.manifest().params.size(); ++i) {
    const auto& p = orig.manifest().params[i];
    EXPECT_EQ(imp.manifest().params[i].name, p.name);  // model order kept
    EXPECT_EQ(imp.manifest().params[i].shape, p.shape);
    EXPECT_EQ(imp.read_f32("param", p.name), orig.read_f32("param", p.name));
    EXPECT_FALSE(imp.has("exp_avg", p.name));
  }
  // Importing again into the same root would overwrite a checkpoint: refused.
  EXPECT_TRUE(throws_with<UserError>([&] { import_consolidated(tmp / "model.h5", tmp / "ft"); },
                                     {"step-0"}));
}

TEST(Import, NestedGroupsOtherFloatWidthsAndExclusions) {
  TempDir tmp;
  {
    // What an h5py user might write: groups per module, f64 values, an integer buffer, a tied head.
    h5::Id f = h5::create_file(tmp / "foreign.h5");
    h5::Id g1 = h5::create_group(f.get(), "/transformer");
    h5::Id g2 = h5::create_group(f.get(), "/transformer/wte");
    const std::vector<double> w = {0.5, -1.25, 3.0, 4.0, 5.5, 6.0};
    h5::write_dataset(f.get(), "/transformer/wte/weight", DType::f64, {3, 2}, w.data());
    h5::write_dataset(f.get(), "/lm_head.weight", DType::f64, {3, 2}, w.data());
    const std::vector<std::int32_t> steps = {1, 2};
    h5::write_dataset(f.get(), "/steps", DType::i32, {2}, steps.data());
  }
  ImportOptions opt;
  opt.exclude = {"lm_head.weight"};
  const ImportResult r = import_consolidated(tmp / "foreign.h5", tmp / "ck", opt);
  EXPECT_EQ(r.params, 1u);
  ASSERT_EQ(r.skipped.size(), 2u);
  CheckpointReader reader(tmp / "ck/step_00000000");
  EXPECT_EQ(reader.read_f32("param", "transformer.wte.weight"),
            (std::vector<float>{0.5f, -1.25f, 3.0f, 4.0f, 5.5f, 6.0f}));
  EXPECT_EQ(reader.manifest().find("transformer.wte.weight")->shape, (Shape{3, 2}));
}

TEST(Import, NotHdf5IsAUserError) {
  TempDir tmp;
  { std::ofstream(tmp / "x.h5") << "hello"; }
  EXPECT_THROW(import_consolidated(tmp / "x.h5", tmp / "ck"), UserError);
  EXPECT_THROW(import_consolidated(tmp / "missing.h5", tmp / "ck"), UserError);
}

TEST(Compat, ListsEveryDifference) {
  TempDir tmp;
  CheckpointReader r(testing::save_toy(tmp.str(), 1, 2));
  std::vector<ExpectedParam> model;
  for (const auto& p : testing::toy_params()) model.push_back({p.name, p.shape});
  EXPECT_TRUE(compatibility_differences(r.manifest(), model).empty());
  EXPECT_NO_THROW(check_compatible(r.manifest(), model, "ckpt"));

  model[0].shape = Shape{9, 5};                              // different vocabulary
  model.erase(model.begin() + 3);                            // ln_f missing from the model
  model.push_back({"transformer.h.1.ln_1.bias", Shape{5}});  // an extra layer
  const auto diff = compatibility_differences(r.manifest(), model);
  ASSERT_EQ(diff.size(), 3u);
  EXPECT_TRUE(
      throws_with<UserError>([&] { check_compatible(r.manifest(), model, "ckpt/step_00000001"); },
                             {"ckpt/step_00000001 does not match the model (3 differences)",
                              "shape of transformer.wte.weight: checkpoint [7, 5], model [9, 5]",
                              "missing from the checkpoint: transformer.h.1.ln_1.bias [5]",
                              "not in the model: transformer.ln_f.weight [5]"}));
}

}  // namespace
}  // namespace strata::checkpoint
