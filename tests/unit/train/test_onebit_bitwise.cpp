// 1-bit Adam and 1-bit LAMB step bitwise as they did before their per-element kernels became
// ops:: entries (#30): each optimizer is stepped through its warm-up and its compressed phase
// (two ranks' exchange played by the fixture's stand-in), with f32 parameters and with bf16
// parameters (masters, widened gradients, the 16-bit copy written), and a hash of every byte of
// the parameters, the masters and the state of every unit (errors included) after each step is
// compared with the hash the host-pointer code produced (recorded at commit c13fe59, before the
// change).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "framework/core/convert.hpp"
#include "framework/core/rng.hpp"
#include "framework/optim/optimizers/onebit_adam.hpp"
#include "framework/optim/optimizers/onebit_lamb.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/train/onebit_fixture.hpp"

namespace strata::train {
namespace {
namespace test_onebit_bitwise {

using onebit_test::exchanged;
using onebit_test::Params;

struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void add(const Tensor& t) {
    if (t.defined()) add(t.raw(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  }
};

// The hashes after each of `steps` steps of `opt` on the fixture's parameters in `dt`.
std::vector<std::uint64_t> run(std::shared_ptr<const optim::Optimizer> opt, DType dt, int steps) {
  TrainerOptions o;
  o.optimizer = std::move(opt);
  o.schedule.type = "constant";
  ShardReductions red;
  red.ranks = 2;
  red.compressed_average = [](std::span<const optim::ErrorFeedbackTensor> ts) {
    for (const auto& t : ts) {
      for (std::size_t i = 0; i < t.n; ++i) t.data[i] = exchanged(t.data[i], i);
      // The error buffers move too, as the real exchange's do.
      t.worker_error[t.n / 2] += 0.25f * t.data[0];
      t.server_error[0] -= 0.125f * t.data[t.n - 1];
    }
  };
  Params model;
  nn::ParamStore store(model.units, nn::ParamStoreOptions{dt, dt, 1, {}, 1, 0});
  Trainer trainer(store, o, std::move(red));
  Philox rng(23);
  auto fill = [&](Tensor& t, float scale, float shift) {
    std::vector<float> x(static_cast<std::size_t>(t.numel()));
    for (float& e : x) e = scale * (rng.next_uniform() - shift);
    convert(x.data(), DType::f32, t.raw(), t.dtype(), x.size());
  };
  for (nn::Parameter* p : store.parameters()) fill(p->value, 0.2f, 0.5f);
  std::vector<std::uint64_t> out;
  for (int k = 1; k <= steps; ++k) {
    for (nn::Parameter* p : store.parameters()) fill(p->grad, 1.0f, 0.45f);
    trainer.step();
    Fnv f;
    for (nn::Parameter* p : store.parameters()) f.add(p->value);
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      auto& s = trainer.states().acquire(u);
      f.add(s.master);
      for (std::size_t i = 0; i < s.tensors.size(); ++i) f.add(s[i]);
      trainer.states().release(u, false);
    }
    out.push_back(f.h);
  }
  return out;
}

void expect_hashes(const char* what, const std::vector<std::uint64_t>& got,
                   const std::vector<std::uint64_t>& want) {
  std::string text;
  for (std::uint64_t h : got) text += std::to_string(h) + "ull, ";
  std::printf("%s: {%s}\n", what, text.c_str());
  EXPECT_EQ(got, want) << what;
}

constexpr int kSteps = 6;

TEST(OneBitBitwise, OneBitAdamStepsAsTheHostKernelsDid) {
  const optim::OneBitAdamHyper h{.lr = 1e-2, .weight_decay = 0.1, .freeze_step = 2};
  expect_hashes("OneBitAdam f32", run(std::make_shared<optim::OneBitAdam>(h), DType::f32, kSteps),
                
                {17233253577146279716ull, 16471034514544823102ull, 16715383913393933416ull, 17363365458902690971ull, 1089275674403474915ull, 4839026878761231858ull});
  expect_hashes("OneBitAdam bf16", run(std::make_shared<optim::OneBitAdam>(h), DType::bf16, kSteps),
                
                {8327061012024846453ull, 9687883311426665162ull, 17861461633199491246ull, 9967808889740282181ull, 4095913453312089748ull, 6742605431539231273ull});
}

TEST(OneBitBitwise, OneBitLambStepsAsTheHostKernelsDid) {
  optim::OneBitLambHyper h;
  h.lr = 1e-2;
  h.weight_decay = 0.1;
  h.freeze_step = 2;
  expect_hashes("OneBitLamb f32", run(std::make_shared<optim::OneBitLamb>(h), DType::f32, kSteps),
                
                {7087816426612539871ull, 10127647829461269714ull, 10729749421730219654ull, 13453959162569748108ull, 17775258106056082855ull, 15263235858999078241ull});
  expect_hashes("OneBitLamb bf16", run(std::make_shared<optim::OneBitLamb>(h), DType::bf16, kSteps),
                
                {5634945018280084187ull, 12958242306321970969ull, 6765878443122114957ull, 15921839705716186449ull, 5699647832761968908ull, 13937984143195939844ull});
}

}  // namespace test_onebit_bitwise
}  // namespace
}  // namespace strata::train
