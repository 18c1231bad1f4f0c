// The Trainer with its optimizer state on the host or on NVMe computes exactly what it computes
// with the state resident: parameters bitwise equal after every step (f32 and bf16, AdamW, SGD,
// AdamW8bit and Adafactor, whole units and an owned shard). Also checks the claims of the CPU
// AdamW the offloaded step runs on: every SIMD path and the threaded dispatcher equal the scalar
// reference bitwise, and so does the bf16 copy of the parameters each path writes.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "framework/core/half.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/optimizers/adafactor.hpp"
#include "framework/optim/optimizers/adamw8bit.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "framework/optim/optimizers/lion8bit.hpp"
#include "framework/optim/optimizers/sgd.hpp"
#include "framework/train/trainer.hpp"
#include "offload/host_state_store.hpp"
#include "offload/nvme_state_store.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {
namespace test_trainer_offload {  // file-local names, unique in a unity build

using test::pattern;
using test::ScratchDir;

// Three units of odd sizes; 2-D parameters decay, 1-D do not.
struct Model {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  std::vector<std::vector<nn::Parameter*>> units;
  Model() {
    auto add = [&](std::size_t unit, std::string name, Shape shape) {
      auto p = std::make_unique<nn::Parameter>();
      p->name = std::move(name);
      p->decay = shape.rank() >= 2;
      p->init = nn::Init::normal(0.02f);
      p->shape = std::move(shape);
      if (units.size() <= unit) units.resize(unit + 1);
      units[unit].push_back(p.get());
      owned.push_back(std::move(p));
    };
    add(0, "emb.weight", Shape{37, 29});
    add(1, "h.0.w", Shape{29, 61});
    add(1, "h.0.b", Shape{61});
    add(2, "h.1.w", Shape{61, 17});
    add(2, "h.1.b", Shape{17});
    add(2, "ln.g", Shape{17});
  }
};

struct TrainRun {
  Model model;
  nn::ParamStore store;
  train::Trainer trainer;
  TrainRun(const nn::ParamStoreOptions& so, const train::TrainerOptions& to,
      std::unique_ptr<train::OptimizerStateStore> states)
      : store(model.units, so), trainer((store.initialize(11), store), to, {}, std::move(states)) {}
  void set_grads(int step) {
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      Tensor g = store.grad_shard(u);
      std::vector<float> v(static_cast<std::size_t>(g.numel()));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern(step, u, i, 3) * 0.1f;
      Tensor src = Tensor::empty(g.shape(), DType::f32);
      std::memcpy(src.raw(), v.data(), v.size() * 4);
      g.copy_from(src);
    }
  }
  std::vector<float> values() {
    std::vector<float> out;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      auto v = store.value_shard(u).to_vector();
      out.insert(out.end(), v.begin(), v.end());
      auto m = trainer.master_shard(u).to_vector();
      out.insert(out.end(), m.begin(), m.end());
    }
    return out;
  }
};

struct Case {
  DType dtype;
  std::string opt;  // "AdamW", "SGD", "AdamW8bit", "Adafactor", "Lion", "Lion8bit"
  int shards;
};

std::shared_ptr<const optim::Optimizer> case_optimizer(const std::string& name) {
  const optim::AdamWHyper adamw{.lr = 1e-2};
  if (name == "AdamW8bit") return std::make_shared<optim::AdamW8bit>(adamw);
  if (name == "Lion") return std::make_shared<optim::Lion>(optim::LionHyper{.lr = 1e-3});
  if (name == "Lion8bit") return std::make_shared<optim::Lion8bit>(optim::LionHyper{.lr = 1e-3});
  if (name == "SGD") return std::make_shared<optim::SGD>(optim::SGDHyper{.lr = 1e-2, .momentum = 0.9});
  if (name == "Adafactor") {
    optim::AdafactorHyper h;
    h.relative_step = false;
    h.lr = 1e-2;
    h.beta1 = 0.9;
    return std::make_shared<optim::Adafactor>(h);
  }
  return std::make_shared<optim::AdamW>(adamw);
}

class TrainerOffload : public ::testing::TestWithParam<Case> {};

TEST_P(TrainerOffload, CpuAndNvmeStatesTrainBitwiseLikeResident) {
  const Case c = GetParam();
  ScratchDir dir("trainer");
  train::TrainerOptions to;
  to.optimizer = case_optimizer(c.opt);
  nn::ParamStoreOptions so{c.dtype, c.dtype, train::state_pad_multiple(to, c.shards), {}};
  so.shard_count = c.shards;
  so.shard_index = c.shards - 1;
  to.max_grad_norm = 0.5;
  to.precision = c.dtype == DType::f32 ? train::Precision::f32 : train::Precision::bf16;
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 2;  // fewer buffers than units: real swapping
  o.aio.block_size = 4096;
  o.ledger = &ledger;
  TrainRun resident(so, to, nullptr);
  TrainRun host(so, to, std::make_unique<HostStateStore>(true, &ledger));
  TrainRun nvme(so, to, std::make_unique<NvmeStateStore>(o));
  for (int step = 1; step <= 6; ++step) {
    for (TrainRun* r : {&resident, &host, &nvme}) {
      r->set_grads(step);
      r->trainer.step();
    }
    const auto want = resident.values();
    ASSERT_EQ(host.values(), want) << "cpu offload differs at step " << step;
    ASSERT_EQ(nvme.values(), want) << "nvme offload differs at step " << step;
  }
  EXPECT_GT(ledger.current(Tier::nvme, Category::optimizer), 0u);
  EXPECT_GT(ledger.current(Tier::host, Category::optimizer), 0u);
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return std::string(dtype_name(i.param.dtype)) + "_" + i.param.opt +
         "_shards" + std::to_string(i.param.shards);
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, TrainerOffload,
    ::testing::Values(Case{DType::f32, "AdamW", 1},
                      Case{DType::bf16, "AdamW", 1},
                      Case{DType::bf16, "AdamW", 3},
                      Case{DType::f32, "SGD", 2},
                      Case{DType::bf16, "SGD", 1},
                      Case{DType::f32, "AdamW8bit", 1},
                      Case{DType::bf16, "AdamW8bit", 2},
                      Case{DType::f32, "Adafactor", 1},
                      Case{DType::bf16, "Adafactor", 3},
                      Case{DType::bf16, "Lion", 2},
                      Case{DType::f32, "Lion8bit", 1},
                      Case{DType::bf16, "Lion8bit", 2}),
    case_name);

// The offloaded step runs framework/optim's AdamW on the host: check its claims at a size that
// takes the threaded path (> kParallelMin) with a ragged tail, on every path this CPU has.
TEST(CpuAdamW, EveryPathAndTheThreadedDispatcherEqualTheScalarReference) {
  const std::size_t n = (std::size_t{1} << 17) * 3 + 13;
  std::vector<float> p0(n), g(n), m0(n), v0(n);
  for (std::size_t i = 0; i < n; ++i) {
    p0[i] = pattern(0, 0, i, 0);
    g[i] = pattern(1, 0, i, 1) * 0.3f;
    m0[i] = pattern(2, 0, i, 2) * 0.01f;
    v0[i] = std::abs(pattern(3, 0, i, 3)) * 1e-4f;
  }
  optim::AdamWHyper h;
  h.lr = 3e-3;
  h.weight_decay = 0.1;
  auto ref_p = p0, ref_m = m0, ref_v = v0;
  optim::adamw_step_reference(ref_p.data(), g.data(), ref_m.data(), ref_v.data(), n, h, 7, 0.5f);
  std::vector<optim::SimdPath> paths = {optim::SimdPath::scalar};
  for (auto s : {optim::SimdPath::avx2, optim::SimdPath::avx512})
    if (optim::simd_path_supported(s)) paths.push_back(s);
  for (auto path : paths) {
    auto p = p0, m = m0, v = v0;
    std::vector<std::uint16_t> p16(n);
    optim::adamw_step_on(path, p.data(), g.data(), m.data(), v.data(), n, h, 7, 0.5f, p16.data(),
                         DType::bf16);
    EXPECT_EQ(p, ref_p) << optim::simd_path_name(path);
    EXPECT_EQ(m, ref_m) << optim::simd_path_name(path);
    EXPECT_EQ(v, ref_v) << optim::simd_path_name(path);
    // The bf16 copy the forward pass reads: each updated master rounded to nearest-even.
    std::size_t bad16 = 0;
    for (std::size_t i = 0; i < n; ++i) bad16 += p16[i] != f32_to_bf16(ref_p[i]);
    EXPECT_EQ(bad16, 0u) << optim::simd_path_name(path);
  }
  auto p = p0, m = m0, v = v0;
  optim::adamw_step(p.data(), g.data(), m.data(), v.data(), n, h, 7, 0.5f);
  EXPECT_EQ(p, ref_p);
  EXPECT_EQ(m, ref_m);
  EXPECT_EQ(v, ref_v);
}

}  // namespace test_trainer_offload
}  // namespace
}  // namespace strata::offload
