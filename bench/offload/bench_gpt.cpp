// Trains a large GPT with its optimizer state and gradients (and, with --offload-param, its
// parameters) offloaded to host memory or NVMe and prints a step-time breakdown, the bytes each
// swap file moved, and where every byte lives — the "does a model bigger than memory train" run
// of docs/offload.md. With NVMe it measures the disk's raw O_DIRECT bandwidth before every step
// and after the last (--raw-bytes) and compares each step's time with its disk bound: the bytes
// it moved at that bandwidth. Synthetic tokens (a throughput and capacity run, not a quality run).
//
//   build/release/bench/offload/bench_offload_gpt --layers 45 --embd 3072 --heads 24
//       --vocab 8192 --seq 64 --optimizer AdamW8bit --offload nvme --nvme /work/swap
//       --offload-param nvme --device-memory 8GiB --steps 3
//
// The job is built as train_gpt builds it (parallel::Training) on a 1-rank local world at
// --stage (default 1: with one rank there is nothing to shard, and optimizer offload needs a
// stage >= 1); --offload-param cpu|nvme needs ZeRO-3 and selects --stage 3 by itself.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "bench/common/cpu_flags.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/size.hpp"
#include "framework/nn/gpt.hpp"
#include "bench/offload/raw_disk.hpp"
#include "framework/config/config.hpp"
#include "offload/factory.hpp"
#include "offload/nvme_state_store.hpp"
#include "offload/value_shard_store.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// What one NVMe swap file moved in a step.
struct Moved {
  std::uint64_t read = 0, written = 0;
  double wait = 0;
  Moved& operator+=(const Moved& o) {
    read += o.read;
    written += o.written;
    wait += o.wait;
    return *this;
  }
};
Moved moved(const offload::Swapper* s) {
  if (!s) return {};
  const auto st = s->stats();
  return {st.bytes_read, st.bytes_written, st.read_wait_s + st.write_wait_s};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Large-GPT training with optimizer offload: step-time breakdown and memory"};
  int layers = 12, embd = 768, heads = 12, vocab = 8192, seq = 64, micro = 1, steps = 3, stage = 1;
  int threads = 0, buffers = 4, qd = 16, param_buffers = 4;
  std::string offload = "nvme", nvme = ".", dtype = "bf16", block = "1MiB", optimizer = "AdamW";
  std::string raw_bytes = "2GiB";
  std::string offload_param = "none", param_nvme;
  std::string device_mem, host_mem;
  bool checkpointing = true;
  bool in_backward = false;
  double clip = -1;
  app.add_option("--layers", layers);
  app.add_option("--embd", embd);
  app.add_option("--heads", heads);
  app.add_option("--vocab", vocab);
  app.add_option("--seq", seq, "sequence length (= block_size)");
  app.add_option("--micro", micro, "sequences per step");
  app.add_option("--steps", steps);
  app.add_option("--optimizer", optimizer, "AdamW | AdamW8bit | Adafactor");
  app.add_option("--raw-bytes", raw_bytes, "bytes of each raw O_DIRECT bandwidth measurement (0: none)");
  app.add_option("--offload", offload, "none | cpu | nvme (optimizer state and gradients)");
  app.add_option("--nvme", nvme, "nvme_path for the swap file");
  app.add_option("--buffers", buffers, "offload_optimizer.buffer_count");
  app.add_option("--offload-param", offload_param,
                 "none | cpu | nvme (ZeRO-3 parameter slices; implies --stage 3)");
  app.add_option("--param-nvme", param_nvme, "offload_param.nvme_path (default: --nvme)");
  app.add_option("--param-buffers", param_buffers, "offload_param.buffer_count");
  app.add_option("--block-size", block, "aio.block_size");
  app.add_option("--queue-depth", qd, "aio.queue_depth");
  app.add_option("--stage", stage, "ZeRO stage (1-3; one rank, so only where state lives changes)");
  app.add_option("--dtype", dtype, "bf16 | f32 parameters");
  app.add_option("--device-memory", device_mem, "cap of the device tier");
  app.add_option("--host-memory", host_mem, "cap of the host tier");
  app.add_option("--threads", threads, "compute threads (default: all)");
  app.add_flag("!--no-checkpointing", checkpointing, "keep activations instead of recomputing");
  app.add_flag("--optimizer-in-backward", in_backward,
               "strata.optimizer_in_backward: each unit updated as soon as its gradient is "
               "complete (needs gradient clipping off)");
  app.add_option("--clip", clip, "gradient_clipping (default 1.0; 0 with --optimizer-in-backward)");
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

    auto device_of = [](const std::string& what, const std::string& v) {
      if (v == "nvme") return config::OffloadDevice::nvme;
      if (v == "cpu") return config::OffloadDevice::cpu;
      if (v != "none") user_fail("bench", "{} must be none, cpu or nvme, not {}", what, v);
      return config::OffloadDevice::none;
    };
    config::Config cfg;
    cfg.train_micro_batch_size_per_gpu = micro;
    cfg.gradient_accumulation_steps = 1;
    if (optimizer == "AdamW8bit") cfg.optimizer = config::Optimizer("AdamW8bit");
    else if (optimizer == "Adafactor") cfg.optimizer = config::Optimizer("Adafactor");
    else if (optimizer != "AdamW") user_fail("bench", "--optimizer must be AdamW, AdamW8bit or Adafactor, not {}", optimizer);
    cfg.optimizer.params.set("lr", 1e-4);
    cfg.gradient_clipping = clip >= 0 ? clip : in_backward ? 0.0 : 1.0;
    cfg.strata.optimizer_in_backward = in_backward;
    cfg.bf16.enabled = bf16;
    cfg.strata.activation_checkpointing =
      checkpointing ? config::Recompute::full : config::Recompute::none;
    auto& z = cfg.zero_optimization;
    z.stage3_prefetch_bucket_size = 1'000'000'000;
    z.stage3_param_persistence_threshold = 0;
    z.stage3_max_reuse_distance = 0;  // a unit leaves the device right after each use
    auto& op = z.offload_param;
    op.device = device_of("--offload-param", offload_param);
    if (op.device != config::OffloadDevice::none) {
      if (stage != 3) std::printf("--offload-param %s: running at ZeRO stage 3\n", offload_param.c_str());
      stage = 3;
      if (op.device == config::OffloadDevice::nvme) op.nvme_path = param_nvme.empty() ? nvme : param_nvme;
      op.buffer_count = param_buffers;
    }
    z.stage = stage;
    auto& oo = z.offload_optimizer;
    oo.device = device_of("--offload", offload);
    if (oo.device == config::OffloadDevice::nvme) oo.nvme_path = nvme;
    oo.buffer_count = buffers;
    cfg.aio.block_size = static_cast<std::int64_t>(parse_bytes(block));
    cfg.aio.queue_depth = qd;

    parallel::InitOptions io;
    io.transport = "local";
    parallel::World world(io);
    const auto t_init = Clock::now();
    nn::Gpt model(gc);
    parallel::Training job(cfg, world.group(), model, parallel::TrainingExtras::on(&ledger));
    const nn::ParamStore& store = job.store();
    auto* nvme_params = dynamic_cast<offload::NvmeValueShardStore*>(store.options().value_store.get());
    auto* nvme_store = dynamic_cast<offload::NvmeStateStore*>(&job.trainer().states());
    auto* nvme_grads = dynamic_cast<offload::NvmeValueShardStore*>(store.options().grad_store.get());
    std::printf("GPT %d layers, d=%d, %d heads, vocab %d, T=%d: %.3f B parameters (%s), %zu units; "
                "%s%s, gradient clipping %g; %d threads; ZeRO stage %d on one rank; CPU flags: %s\n",
                layers, embd, heads, vocab, seq, static_cast<double>(store.total_numel()) / 1e9,
                dtype.c_str(), store.num_units(), optimizer.c_str(),
                in_backward ? " in backward" : "", cfg.gradient_clipping, cpu::num_threads(),
                stage, bench::cpu_flags().c_str());
    std::printf("%s\n", offload::describe(cfg).c_str());
    std::printf("set-up %.1f s (init + optimizer state %s); %s\nmemory after set-up:\n%s",
                since(t_init), offload.c_str(), rss().c_str(), ledger.report().c_str());
    std::fflush(stdout);

    Philox rng(7);
    auto next_batch = [&](nn::Batch& b) {
      std::int32_t* i = b["tokens"].data<std::int32_t>();
      std::int32_t* t = b["targets"].data<std::int32_t>();
      for (std::int64_t k = 0; k < b["tokens"].numel(); ++k) {
        i[k] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint32_t>(vocab)));
        t[k] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint32_t>(vocab)));
      }
    };
    // The disk's raw O_DIRECT bandwidth, measured before every step and after the last, in the
    // swap directory (best of 8 MiB and 64 MiB calls); a step's disk bound uses the mean of the
    // measurements before and after it.
    const std::uint64_t raw_n = parse_bytes(raw_bytes);
    const bool on_nvme = nvme_store || nvme_params || nvme_grads;
    auto measure_raw = [&] {
      if (!on_nvme || raw_n == 0) return bench::Raw{};
      const bench::Raw r = bench::raw_bandwidth(nvme, raw_n, {8ull << 20, 64ull << 20});
      std::printf("raw O_DIRECT (%s): write %.0f MB/s, read %.0f MB/s\n", format_bytes(raw_n).c_str(),
                  r.write_bps / 1e6, r.read_bps / 1e6);
      std::fflush(stdout);
      return r;
    };
    struct StepRow {
      double total = 0, bound = 0;
      Moved m;
    };
    std::vector<StepRow> rows;
    bench::Raw raw_before = measure_raw();
    bench::Raw raw_best = raw_before;  // the fastest the disk went in any measurement of the run
    for (int s = 1; s <= steps; ++s) {
      ledger.reset_peaks();
      if (nvme_store) nvme_store->swapper().reset_stats();
      if (nvme_params) nvme_params->swapper().reset_stats();
      if (nvme_grads) nvme_grads->swapper().reset_stats();
      const parallel::EngineStep es = job.step(next_batch);
      const parallel::StepTimes& t = es.times;
      const double total = t.total, loss = es.loss, opt = t.optimizer + t.offload_wait;
      std::printf("step %d: loss %.4f, %.1f s: %s", s, loss, total, parallel::describe(t).c_str());
      if (nvme_store && in_backward) {  // the updates' time is part of backward's
        const auto st = nvme_store->swapper().stats();
        std::printf("; optimizer state I/O (updates in backward): waiting for reads %.1f s, for "
                    "writes %.1f s; read %s, wrote %s (%.0f MB/s over the step)",
                    st.read_wait_s, st.write_wait_s, format_bytes(st.bytes_read).c_str(),
                    format_bytes(st.bytes_written).c_str(),
                    static_cast<double>(st.bytes_read + st.bytes_written) / total / 1e6);
      } else if (nvme_store) {
        const auto st = nvme_store->swapper().stats();
        std::printf("; optimizer state I/O: waiting for reads %.1f s, for writes %.1f s; "
                    "AdamW+overlapped I/O %.1f s; read %s, wrote %s: %.0f MB/s",
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
      if (nvme_grads) {
        // Gradients: written as each unit's reduction completes in backward, read by the norm
        // and by the update (a zeroed unit's first accumulation reads nothing).
        const auto st = nvme_grads->swapper().stats();
        std::printf("; grads I/O: read %s, wrote %s, waiting %.1f s", format_bytes(st.bytes_read).c_str(),
                    format_bytes(st.bytes_written).c_str(), st.read_wait_s + st.write_wait_s);
      }
      std::printf("; peak device %s, host %s, nvme %s; %s\n",
                  format_bytes(ledger.peak(Tier::device)).c_str(),
                  format_bytes(ledger.peak(Tier::host)).c_str(),
                  format_bytes(ledger.peak(Tier::nvme)).c_str(), rss().c_str());
      std::fflush(stdout);
      StepRow row;
      row.total = total;
      row.m += moved(nvme_store ? &nvme_store->swapper() : nullptr);
      row.m += moved(nvme_params ? &nvme_params->swapper() : nullptr);
      row.m += moved(nvme_grads ? &nvme_grads->swapper() : nullptr);
      const bench::Raw raw_after = measure_raw();
      raw_best.read_bps = std::max(raw_best.read_bps, raw_after.read_bps);
      raw_best.write_bps = std::max(raw_best.write_bps, raw_after.write_bps);
      if (raw_after.read_bps > 0) {
        const double rr = (raw_before.read_bps + raw_after.read_bps) / 2;
        const double rw = (raw_before.write_bps + raw_after.write_bps) / 2;
        row.bound = static_cast<double>(row.m.read) / rr + static_cast<double>(row.m.written) / rw;
      }
      raw_before = raw_after;
      rows.push_back(row);
    }
    if (on_nvme) {
      // The step's own bound uses the bandwidth measured around it; a virtual disk's bandwidth
      // can swing between measurements, so the bound at the fastest bandwidth of the whole run
      // (the smallest bound, the strictest ratio) is shown beside it.
      std::printf("step | total | NVMe read | NVMe written | disk bound (raw O_DIRECT around the "
                  "step) | step / bound | bound at the run's fastest raw bandwidth (%.0f MB/s "
                  "read, %.0f MB/s write) | step / that bound\n",
                  raw_best.read_bps / 1e6, raw_best.write_bps / 1e6);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const StepRow& r = rows[i];
        const double best = raw_best.read_bps > 0
                                ? static_cast<double>(r.m.read) / raw_best.read_bps +
                                      static_cast<double>(r.m.written) / raw_best.write_bps
                                : 0.0;
        std::printf("%zu | %.1f s | %s | %s | %.1f s | %.2fx | %.1f s | %.2fx\n", i + 1, r.total,
                    format_bytes(r.m.read).c_str(), format_bytes(r.m.written).c_str(), r.bound,
                    r.bound > 0 ? r.total / r.bound : 0.0, best, best > 0 ? r.total / best : 0.0);
      }
    }
    std::printf("memory at the end (peaks of the last step):\n%s", ledger.report().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_offload_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
