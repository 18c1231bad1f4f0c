// fp16.auto_cast: with fp16 training the model's floating-point inputs reach it rounded to fp16 in
// every forward (the step's micro-batches and evaluation), as DeepSpeed's auto_cast casts them;
// integer fields are untouched. A probe model (one Linear and a cross-entropy, f32 activations so
// that it does not round its input itself) records what it was handed. A run with auto_cast on
// is bitwise a run without it fed the rounded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "framework/backend/ops/ops.hpp"
#include "framework/core/convert.hpp"
#include "tests/dist/engine/test_resume_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_auto_cast {

constexpr int kIn = 4, kClasses = 3, kMicro = 5;

struct Probe : nn::Model {
  nn::Linear fc{"probe.fc", kIn, kClasses, true, 0.3f};
  std::vector<float> seen;  // the x of the last forward
  std::vector<std::int32_t> seen_labels;
  Probe() : Model("probe") { add_child(fc); }
  std::vector<std::vector<nn::Parameter*>> units() override { return {fc.parameters()}; }
  std::vector<nn::UnitUse> unit_schedule() const override { return {{false, 0}, {true, 0}}; }
  std::vector<nn::BatchField> batch_fields(int m) const override {
    return {{"x", Shape{m, kIn}, DType::f32}, {"labels", Shape{m}, DType::i32}};
  }
  double forward(nn::Context& ctx, const nn::Batch& batch) override {
    const Tensor& x = batch["x"];
    const Tensor& labels = batch["labels"];
    seen = x.to_vector();
    seen_labels.assign(labels.data<std::int32_t>(), labels.data<std::int32_t>() + labels.numel());
    const Tensor xin = x.dtype() == ctx.act_dtype ? x : x.to(ctx.act_dtype, ctx.activations);
    ctx.before_forward(0);
    Tensor logits = fc.forward(ctx, xin);
    ctx.after_forward(0);
    Tensor lse = ctx.act(Shape{x.dim(0)}, DType::f32);
    const double sum = ops::cross_entropy_forward(logits, labels, lse);
    save(ctx, {logits, lse, labels.clone(ctx.activations)});
    return sum / static_cast<double>(x.dim(0));
  }
  void backward(nn::Context& ctx, float scale) override {
    auto s = restore(ctx);
    Tensor logits = std::move(s.tensors[0]);
    ops::cross_entropy_backward(logits, s.tensors[1], s.tensors[2], logits,
                                scale / static_cast<float>(logits.dim(0)));
    ctx.before_backward(0);
    fc.backward(ctx, logits, /*need_dx=*/false);
    ctx.after_backward(0);
  }
};

float to_fp16_and_back(float v) {
  std::uint16_t h;
  f32_to_f16(&v, &h, 1);
  float out;
  f16_to_f32(&h, &out, 1);
  return out;
}

// Inputs that fp16 cannot hold exactly; `rounded` gives them already rounded.
void fill(nn::Batch& b, int step, bool rounded) {
  float* x = b["x"].data<float>();
  for (int i = 0; i < kMicro * kIn; ++i) {
    const float v = 0.1f + 1.2345e-4f * static_cast<float>(i + 7 * step);
    x[i] = rounded ? to_fp16_and_back(v) : v;
  }
  auto* y = b["labels"].data<std::int32_t>();
  for (int i = 0; i < kMicro; ++i) y[i] = (i + step) % kClasses;
}

config::Config fp16_config(bool auto_cast) {
  config::Config cfg = job_config(trainer_options(DType::f32), kMicro, 1, 0, DType::f16);
  cfg.fp16.auto_cast = auto_cast;
  return cfg;
}

TEST(AutoCast, InputsReachTheModelRoundedToFp16InTrainingAndEvaluation) {
  const SingleThreaded one_thread;
  const auto self = world().split(world().rank(), 0, "self");
  Probe cast_model, plain_model, prerounded_model;
  parallel::Training cast(fp16_config(true), self, cast_model);
  parallel::Training plain(fp16_config(false), self, plain_model);
  parallel::Training prerounded(fp16_config(false), self, prerounded_model);
  nn::Batch given(cast_model.batch_fields(kMicro));
  bool any_changed = false;
  for (int s = 0; s < 4; ++s) {
    const double a = cast.step([&](nn::Batch& b) { fill(b, s, false); }).loss;
    const double p = plain.step([&](nn::Batch& b) { fill(b, s, false); }).loss;
    const double r = prerounded.step([&](nn::Batch& b) { fill(b, s, true); }).loss;
    fill(given, s, false);
    const std::vector<float> x = given["x"].to_vector();
    ASSERT_EQ(cast_model.seen.size(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(cast_model.seen[i], to_fp16_and_back(x[i])) << "step " << s << " element " << i;
      EXPECT_EQ(plain_model.seen[i], x[i]) << "auto_cast off changed the input";
      any_changed = any_changed || cast_model.seen[i] != x[i];
    }
    EXPECT_EQ(cast_model.seen_labels, plain_model.seen_labels) << "integer fields changed";
    EXPECT_EQ(a, r) << "step " << s << ": auto_cast is not the run fed rounded inputs";
    if (s == 0) {
      EXPECT_NE(a, p) << "rounding the inputs changed nothing: a test that cannot fail";
    }
  }
  EXPECT_TRUE(any_changed);
  // Evaluation rounds too, without touching the caller's batch.
  fill(given, 9, false);
  const std::vector<float> before = given["x"].to_vector();
  cast.engine().eval_loss(given);
  EXPECT_EQ(given["x"].to_vector(), before);
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(cast_model.seen[i], to_fp16_and_back(before[i]));
}

}  // namespace test_auto_cast
}  // namespace
