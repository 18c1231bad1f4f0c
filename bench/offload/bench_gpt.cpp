// Trains a large GPT with its optimizer state (and, with --offload-param, its parameters)
// offloaded to host memory or NVMe and prints a step-time breakdown and where every byte lives —
// the "does a model bigger than memory train" run of docs/offload.md. Synthetic tokens (a
// throughput and capacity run, not a quality run).
//
//   build/release/bench/offload/bench_offload_gpt --layers 32 --embd 2560 --heads 20
//       --vocab 8192 --seq 64 --offload nvme --nvme /work/swap --offload-param nvme --steps 3
//
// --engine plain (default): one process, no ZeRO (on one rank there is nothing to shard), the
// Trainer's optimizer state in the offload store. --engine zero: the DataParallelEngine on a
// 1-rank local world at --stage (1-3), as train_gpt runs. --offload-param cpu|nvme needs ZeRO-3
// and selects --engine zero --stage 3 by itself.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/size.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/train/trainer.hpp"
#include "offload/factory.hpp"
#include "offload/nvme_state_store.hpp"
#include "offload/value_shard_store.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/dp_engine.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Forwards to the real store and times the optimizer's pass over the units.
class TimedStore final : public train::OptimizerStateStore {
 public:
  explicit TimedStore(std::unique_ptr<train::OptimizerStateStore> s) : s_(std::move(s)) {}
  void create(std::size_t u, const train::StateLayout& l, const Tensor& v) override { s_->create(u, l, v); }
  void begin_step() override {
    t0_ = Clock::now();
    begin = t0_;
    s_->begin_step();
  }
  train::UnitOptimizerState& acquire(std::size_t u) override { return s_->acquire(u); }
  void release(std::size_t u, bool dirty) override { s_->release(u, dirty); }
  void end_step() override {
    s_->end_step();
    seconds = since(t0_);
    end = Clock::now();
  }
  std::size_t num_units() const override { return s_->num_units(); }
  train::OptimizerStateStore& inner() { return *s_; }
  double seconds = 0;                 // begin_step .. end_step: the update of every unit
  Clock::time_point begin{}, end{};  // when they happened

 private:
  std::unique_ptr<train::OptimizerStateStore> s_;
  Clock::time_point t0_;
};

// The process's resident memory now and at its peak, as the kernel counts it.
std::string rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  std::uint64_t now = 0, peak = 0;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) now = std::stoull(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) peak = std::stoull(line.substr(6)) * 1024;
  }
  return fmt::format("process RSS {} (peak {})", format_bytes(now), format_bytes(peak));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Large-GPT training with optimizer offload: step-time breakdown and memory"};
  int layers = 12, embd = 768, heads = 12, vocab = 8192, seq = 64, micro = 1, steps = 3, stage = 3;
  int threads = 0, buffers = 4, qd = 16, param_buffers = 4;
  std::string offload = "nvme", nvme = ".", engine = "plain", dtype = "bf16", block = "1MiB";
  std::string offload_param = "none", param_nvme;
  std::string device_mem, host_mem;
  bool checkpointing = true;
  app.add_option("--layers", layers);
  app.add_option("--embd", embd);
  app.add_option("--heads", heads);
  app.add_option("--vocab", vocab);
  app.add_option("--seq", seq, "sequence length (= block_size)");
  app.add_option("--micro", micro, "sequences per step");
  app.add_option("--steps", steps);
  app.add_option("--offload", offload, "none | cpu | nvme (optimizer state)");
  app.add_option("--nvme", nvme, "nvme_path for the swap file");
  app.add_option("--buffers", buffers, "offload_optimizer.buffer_count");
  app.add_option("--offload-param", offload_param,
                 "none | cpu | nvme (ZeRO-3 parameter slices; implies --engine zero --stage 3)");
  app.add_option("--param-nvme", param_nvme, "offload_param.nvme_path (default: --nvme)");
  app.add_option("--param-buffers", param_buffers, "offload_param.buffer_count");
  app.add_option("--block-size", block, "aio.block_size");
  app.add_option("--queue-depth", qd, "aio.queue_depth");
  app.add_option("--engine", engine, "plain (one process) | zero (DataParallelEngine, 1 rank)");
  app.add_option("--stage", stage, "ZeRO stage with --engine zero");
  app.add_option("--dtype", dtype, "bf16 | f32 parameters");
  app.add_option("--device-memory", device_mem, "cap of the device tier");
  app.add_option("--host-memory", host_mem, "cap of the host tier");
  app.add_option("--threads", threads, "compute threads (default: all)");
  app.add_flag("!--no-checkpointing", checkpointing, "keep activations instead of recomputing");
  CLI11_PARSE(app, argc, argv);

  try {
    if (threads > 0) cpu::set_num_threads(threads);
    auto& ledger = MemoryLedger::global();
    if (!device_mem.empty()) ledger.set_cap(Tier::device, parse_bytes(device_mem));
    if (!host_mem.empty()) ledger.set_cap(Tier::host, parse_bytes(host_mem));
    nn::GptConfig gc;
    gc.n_layer = layers;
    gc.n_embd = embd;
    gc.n_head = heads;
    gc.vocab_size = vocab;
    gc.block_size = seq;
    const bool bf16 = dtype == "bf16";
    const DType pd = bf16 ? DType::bf16 : DType::f32;

    auto device_of = [](const std::string& what, const std::string& v) {
      if (v == "nvme") return config::OffloadDevice::nvme;
      if (v == "cpu") return config::OffloadDevice::cpu;
      if (v != "none") user_fail("bench", "{} must be none, cpu or nvme, not {}", what, v);
      return config::OffloadDevice::none;
    };
    config::Config cfg;
    auto& op = cfg.zero_optimization.offload_param;
    op.device = device_of("--offload-param", offload_param);
    if (op.device != config::OffloadDevice::none) {
      if (engine == "plain") std::printf("--offload-param %s: running --engine zero --stage 3\n",
                                         offload_param.c_str());
      engine = "zero";
      stage = 3;
      if (op.device == config::OffloadDevice::nvme) op.nvme_path = param_nvme.empty() ? nvme : param_nvme;
      op.buffer_count = param_buffers;
    }
    cfg.zero_optimization.stage = engine == "zero" ? stage : 1;  // one rank: nothing to shard
    auto& oo = cfg.zero_optimization.offload_optimizer;
    oo.device = device_of("--offload", offload);
    if (oo.device == config::OffloadDevice::nvme) oo.nvme_path = nvme;
    oo.buffer_count = buffers;
    cfg.aio.block_size = static_cast<std::int64_t>(parse_bytes(block));
    cfg.aio.queue_depth = qd;
    offload::validate(cfg, cfg.zero_optimization.stage);

    std::optional<parallel::World> world;
    parallel::Group dp;
    nn::ParamStoreOptions so{pd, pd, 1, {}};
    if (engine == "zero") {
      parallel::InitOptions io;
      io.transport = "local";
      world.emplace(io);
      dp = world->group();
      so = parallel::ZeroHooks::store_options(so, stage, dp);
      so.value_store = offload::make_value_shard_store(cfg, 0, so.memory);
    }
    auto* nvme_params = dynamic_cast<offload::NvmeValueShardStore*>(so.value_store.get());
    const auto t_init = Clock::now();
    nn::Gpt model(gc);
    model.set_checkpointing(checkpointing);
    nn::ParamStore store(model.units(), so);
    store.initialize(1234);
    std::printf("GPT %d layers, d=%d, %d heads, vocab %d, T=%d: %.3f B parameters (%s), %zu units; "
                "%d threads; engine %s%s\n",
                layers, embd, heads, vocab, seq, static_cast<double>(store.total_numel()) / 1e9,
                dtype.c_str(), store.num_units(), cpu::num_threads(), engine.c_str(),
                engine == "zero" ? fmt::format(" (ZeRO stage {})", stage).c_str() : "");
    std::printf("%s\n", offload::describe(cfg).c_str());
    std::fflush(stdout);
    train::TrainerOptions to;
    to.adamw.lr = 1e-4;
    to.max_grad_norm = 1.0;
    to.precision = bf16 ? train::Precision::bf16 : train::Precision::f32;
    auto inner = offload::make_state_store(cfg, 0, so.memory);
    if (!inner) inner = train::make_memory_state_store(so.memory);
    auto timed_owned = std::make_unique<TimedStore>(std::move(inner));
    TimedStore* timed = timed_owned.get();
    train::Trainer trainer(store, to,
                           engine == "zero" ? parallel::dp_reductions(dp) : train::ShardReductions{},
                           std::move(timed_owned));
    std::optional<parallel::DataParallelEngine> eng;
    if (engine == "zero") {
      parallel::EngineOptions eo;
      eo.micro_batch = micro;
      eo.seq_len = seq;
      eo.zero.stage = stage;
      eo.zero.prefetch_elements = 1'000'000'000;
      eo.zero.persistence_threshold = 0;
      eng.emplace(dp, model, store, trainer, eo);
    }
    auto* nvme_store = dynamic_cast<offload::NvmeStateStore*>(&timed->inner());
    std::printf("set-up %.1f s (init + optimizer state %s); %s\nmemory after set-up:\n%s",
                since(t_init), offload.c_str(), rss().c_str(), ledger.report().c_str());
    std::fflush(stdout);

    std::vector<std::int32_t> in(static_cast<std::size_t>(micro) * seq), tgt(in.size());
    Philox rng(7);
    auto next_batch = [&](std::int32_t* i, std::int32_t* t) {
      for (std::size_t k = 0; k < in.size(); ++k) {
        i[k] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint32_t>(vocab)));
        t[k] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint32_t>(vocab)));
      }
    };
    nn::Context ctx;
    for (int s = 1; s <= steps; ++s) {
      ledger.reset_peaks();
      if (nvme_store) nvme_store->swapper().reset_stats();
      if (nvme_params) nvme_params->swapper().reset_stats();
      const auto t0 = Clock::now();
      double loss = 0, fb = 0;
      if (eng) {
        loss = eng->train_step(next_batch).loss;
        // includes the gradient reductions and the norm
        fb = std::chrono::duration<double>(timed->begin - t0).count();
      } else {
        next_batch(in.data(), tgt.data());
        loss = model.forward(ctx, in.data(), tgt.data(), micro, seq);
        model.backward(ctx, trainer.loss_scale());
        fb = since(t0);
        trainer.step();
      }
      const double total = since(t0), opt = timed->seconds;
      const auto t_end = Clock::now();
      // Around the update: the gradient norm before it, zeroing gradients after it.
      const double after = std::chrono::duration<double>(t_end - timed->end).count();
      const double before = std::max(0.0, total - fb - opt - after);  // in fb with the engine
      std::printf("step %d: loss %.4f, %.1f s = forward+backward %.1f s + grad norm %.1f s + "
                  "optimizer %.1f s + zero grads %.1f s",
                  s, loss, total, fb, before, opt, after);
      if (nvme_store) {
        const auto st = nvme_store->swapper().stats();
        std::printf(" (waiting for reads %.1f s, for writes %.1f s; AdamW+overlapped I/O %.1f s; "
                    "read %s, wrote %s: %.0f MB/s)",
                    st.read_wait_s, st.write_wait_s, opt - st.read_wait_s - st.write_wait_s,
                    format_bytes(st.bytes_read).c_str(), format_bytes(st.bytes_written).c_str(),
                    static_cast<double>(st.bytes_read + st.bytes_written) / opt / 1e6);
      }
      if (nvme_params) {
        // Parameter slices: read in the all-gathers of forward and backward and by the optimizer,
        // written back by the optimizer; waits are time the step stood still for the disk.
        const auto st = nvme_params->swapper().stats();
        std::printf("; params I/O: read %s, wrote %s (%.0f MB/s over the step), waiting for reads "
                    "%.1f s, for writes %.1f s, %llu of %llu acquires read ahead",
                    format_bytes(st.bytes_read).c_str(), format_bytes(st.bytes_written).c_str(),
                    static_cast<double>(st.bytes_read + st.bytes_written) / total / 1e6,
                    st.read_wait_s, st.write_wait_s, static_cast<unsigned long long>(st.hits),
                    static_cast<unsigned long long>(st.acquires));
      }
      std::printf("; peak device %s, host %s, nvme %s; %s\n",
                  format_bytes(ledger.peak(Tier::device)).c_str(),
                  format_bytes(ledger.peak(Tier::host)).c_str(),
                  format_bytes(ledger.peak(Tier::nvme)).c_str(), rss().c_str());
      std::fflush(stdout);
    }
    std::printf("memory at the end (peaks of the last step):\n%s", ledger.report().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_offload_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
