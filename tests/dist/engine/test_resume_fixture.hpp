// Shared pieces of the checkpoint/resume tests: a temporary directory every rank sees (made by
// rank 0), a small token file, and a training job (replica + shuffled sampler + checkpointer)
// whose full fp32 masters and optimizer moments can be gathered for bitwise comparison.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/data/sampler.hpp"
#include "framework/data/token_file.hpp"
#include "framework/data/token_writer.hpp"
#include "parallel/engine/checkpointing.hpp"
#include "parallel/engine/rank_agreement.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/zero_fixture.hpp"

namespace strata::test {

// One compute thread while it lives: these tests run several ranks on few cores, where OpenMP
// teams that spin-wait make each step ~50x slower.
struct SingleThreaded {
  int saved = cpu::num_threads();
  SingleThreaded() { cpu::set_num_threads(1); }
  ~SingleThreaded() { cpu::set_num_threads(saved); }
};

// A fresh directory under /tmp made by rank 0 of g (every rank gets its name); removed when
// the object goes out of scope, after every rank is done with it.
struct SharedTempDir {
  parallel::Group g;
  std::string path;
  SharedTempDir(const parallel::Group& group, const std::string& tag) : g(group) {
    if (g.rank() == 0) {
      std::string templ = "/tmp/strata_" + tag + "_XXXXXX";
      if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
      path = templ;
    }
    parallel::broadcast_string(g, path);
  }
  ~SharedTempDir() {
    try {
      g.barrier().wait();
    } catch (...) {
    }
    if (g.rank() == 0) std::filesystem::remove_all(path);
  }
  std::string sub(const std::string& name) const { return path + "/" + name; }
};

// A token file of `tokens` tokens (vocabulary V) with some structure, written by rank 0.
inline std::string write_tokens(const parallel::Group& g, const std::string& path, int V,
                                std::uint64_t tokens) {
  if (g.rank() == 0) {
    data::TokenFileWriter w(path, 2, static_cast<std::uint64_t>(V));
    Philox r(77);
    std::uint32_t t = 1;
    for (std::uint64_t i = 0; i < tokens; ++i) {
      w.append(t);
      t = r.next_uniform() < 0.6f
              ? (t + 5) % static_cast<std::uint32_t>(V)
              : static_cast<std::uint32_t>(r.next_below(static_cast<std::uint64_t>(V)));
    }
    w.commit();
  }
  g.barrier().wait();
  return path;
}

inline train::TrainerOptions trainer_options(DType dt, bool sgd = false) {
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
  o.max_grad_norm = 1.0;
  if (sgd) o.optimizer = std::make_shared<optim::SGD>(optim::SGDHyper{.lr = 0.05, .momentum = 0.9});
  o.precision = dt == DType::bf16  ? train::Precision::bf16
                : dt == DType::f16 ? train::Precision::fp16
                                   : train::Precision::f32;
  o.dynamic_scaler.scale_window = 3;  // fp16: the scale moves during a short test
  return o;
}

struct JobSpec {
  nn::GptConfig model = tiny_gpt();
  train::TrainerOptions trainer = trainer_options(DType::f32);
  DType dtype = DType::f32;
  int stage = 0;
  int micro = 2, accum = 2;
  int pp = 1;          // pipeline stages (the data is split over dp = world / (tp * pp))
  int vpp = 1;         // model chunks per pipeline stage (the interleaved schedule)
  int tp = 1;          // tensor-parallel parts
  bool sp = false;     // sequence parallelism over them (strata.sequence_parallel)
  std::string tokens;  // token file
  parallel::CheckpointOptions ckpt;
  // offload_optimizer (and so gradient offload); nvme: swap files under `swap`.
  config::OffloadDevice offload = config::OffloadDevice::none;
  std::string swap;
};

// One training job over `dp` (also its world; with spec.pp > 1 its ranks form dp x pp).
struct Job {
  std::unique_ptr<data::TokenFile> file;
  std::unique_ptr<Replica> r;
  std::unique_ptr<data::BatchSampler> sampler;
  parallel::Checkpointer* ck = nullptr;  // the assembly's
  std::int64_t step = 0;

  Job(const parallel::Group& dp, const JobSpec& s) {
    file = std::make_unique<data::TokenFile>(s.tokens);
    config::Config cfg = job_config(s.trainer, s.micro, s.accum, s.stage, s.dtype);
    cfg.strata.checkpoint.dir = s.ckpt.root;
    cfg.strata.checkpoint.save_total_limit = s.ckpt.retention.save_total_limit;
    cfg.strata.checkpoint.keep_every = s.ckpt.retention.keep_every;
    cfg.strata.checkpoint.async = s.ckpt.async;
    cfg.strata.pipeline_parallel_size = s.pp;
    cfg.strata.virtual_pipeline_stages = s.vpp;
    cfg.strata.tensor_parallel_size = s.tp;
    cfg.strata.sequence_parallel = s.sp;
    cfg.zero_optimization.offload_optimizer.device = s.offload;
    if (s.offload == config::OffloadDevice::nvme) {
      cfg.zero_optimization.offload_optimizer.nvme_path = s.swap;
      cfg.zero_optimization.offload_optimizer.buffer_count = 2;
      cfg.aio.block_size = 8192;
    }
    r = std::make_unique<Replica>(s.model, cfg, dp);
    const parallel::Group& data = r->training->dp();
    sampler = std::make_unique<data::BatchSampler>(*file, s.model.block_size, s.micro, data.size(),
                                                   data.rank(), true, 99);
    ck = &r->training->checkpoints().checkpointer();
  }
  double train_step() {
    ++step;
    return r->engine
        .train_step([this](nn::Batch& b) { sampler->next(b["tokens"], b["targets"]); })
        .loss;
  }
  void save() {
    parallel::JobState js;
    js.step = step;
    const data::SamplerState st = sampler->state();
    js.sampler = checkpoint::SamplerRecord{st.position, st.epoch};
    ck->save(js);
  }
  void apply(const parallel::LoadedCheckpoint& l) {
    step = l.step;
    if (l.state.sampler) sampler->set_state({l.state.sampler->position, l.state.sampler->epoch});
  }
  bool resume(const std::string& spec,
              const checkpoint::WarningSink& warn = checkpoint::warn_to_stderr) {
    auto l = ck->resume(spec, warn);
    if (l) apply(*l);
    return l.has_value();
  }

  // Other weights, moments and update count than any run would have: a load must replace all.
  void scramble() {
    r->store.initialize(999);
    for (std::size_t u = 0; u < r->store.num_units(); ++u) {
      auto& s = r->trainer.states().acquire(u);
      if (s.master.defined()) s.master.fill(0.5);
      s[0].fill(0.25);  // AdamW's m, SGD's momentum
      if (s.tensors.size() > 1) s[1].fill(0.125);  // AdamW's v
      r->trainer.states().release(u, true);
    }
    r->trainer.set_updates(12345);
  }

  // The full state of every unit (padding stripped), gathered over dp: which = 0 fp32 masters,
  // 1 first moment (m or momentum), 2 AdamW's v.
  std::vector<float> gather(int which) {
    const auto& dp = r->engine.dp();
    auto& store = r->store;
    std::vector<float> out;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const auto& l = store.layout(u);
      std::vector<float> mine;
      if (which == 0) {
        mine = r->trainer.master_shard(u).to_vector();
      } else {
        auto& s = r->trainer.states().acquire(u);
        mine = s[which == 1 ? 0 : 1].to_vector();  // AdamW's m and v, SGD's momentum
        r->trainer.states().release(u, false);
      }
      std::vector<float> full(static_cast<std::size_t>(l.padded));
      if (store.options().shard_count == 1)
        full = mine;
      else
        dp.all_gather(parallel::span(mine.data(), mine.size()),
                      parallel::span(full.data(), full.size()))
            .wait();
      out.insert(out.end(), full.begin(), full.begin() + l.numel);
    }
    return out;
  }
};

}  // namespace strata::test
