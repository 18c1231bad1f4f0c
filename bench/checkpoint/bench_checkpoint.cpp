// bench_checkpoint: checkpoint save and load throughput of a GPT's sharded training state (all
// ranks together) against a raw sequential O_DIRECT write and read of the same number of bytes
// to the same directory in the same run, and the training step time while a background save is
// in flight against without (for each CPU priority of the background writer, side by side). Run
// under mpirun -np N; prints ratios. Repeats alternate the things compared, so that load from
// other processes hits both sides alike; medians of the per-repeat ratios are the headline.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "bench/common/stats.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/reclaim.hpp"
#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/checkpointing.hpp"
#include "parallel/engine/training.hpp"
#include "parallel/engine/rank_agreement.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int n_layer = 6, n_embd = 384, vocab = 8192, seq = 64, micro = 2, stage = 1;
  int repeats = 5, steps = 4, max_steps_in_flight = 12, threads = 0;
  std::string dir = "/tmp";
  std::vector<std::string> priorities = {"idle", "low", "normal"};
  bool io = true, steps_part = true;  // which parts run
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wall time of f() on the slowest rank (barriers before and after).
template <typename F>
double timed(const parallel::Group& g, F&& f) {
  g.barrier().wait();
  const auto t0 = Clock::now();
  f();
  g.barrier().wait();
  return seconds_since(t0);
}

// Evicts a file's clean pages, so the next read comes from the disk, not the page cache.
void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// The reference: `bytes` written sequentially with O_DIRECT in 8 MiB blocks, then fsync; and read
// back the same way.
struct RawIo {
  static constexpr std::size_t kBlock = 8u << 20;
  std::string path;
  std::uint64_t bytes;
  void* buf = nullptr;
  RawIo(std::string p, std::uint64_t n) : path(std::move(p)), bytes(n) {
    if (::posix_memalign(&buf, 4096, kBlock) != 0) fail("bench", "posix_memalign failed");
    std::memset(buf, 0x5a, kBlock);
  }
  ~RawIo() {
    std::free(buf);
    ::unlink(path.c_str());
  }
  std::uint64_t rounded() const { return (bytes + 4095) / 4096 * 4096; }
  void write() const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd < 0) fail("bench", "cannot open {} with O_DIRECT: {}", path, std::strerror(errno));
    for (std::uint64_t off = 0; off < rounded(); off += kBlock) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, rounded() - off));
      if (::pwrite(fd, buf, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
        fail("bench", "O_DIRECT write failed: {}", std::strerror(errno));
    }
    ::fsync(fd);
    ::close(fd);
  }
  void read() const {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) fail("bench", "cannot open {} with O_DIRECT: {}", path, std::strerror(errno));
    for (std::uint64_t off = 0; off < rounded(); off += kBlock) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, rounded() - off));
      if (::pread(fd, buf, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
        fail("bench", "O_DIRECT read failed: {}", std::strerror(errno));
    }
    ::close(fd);
  }
};

using bench::median;

double best(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}
std::string range(const std::vector<double>& v) {
  if (v.empty()) return "-";
  return fmt::format("{:.2f}..{:.2f}", *std::min_element(v.begin(), v.end()),
                     *std::max_element(v.begin(), v.end()));
}

struct AsyncVariant {
  std::string priority;
  std::unique_ptr<parallel::Checkpointer> ckpt;
  std::vector<double> during, cpu_during, stage_s, commit_s, ratio;
  int unfinished = 0;  // saves still in flight after max_steps_in_flight steps
};

int run(const Options& o, const parallel::Group& w) {
  const bool lead = w.rank() == 0;
  if (o.threads > 0) {
    cpu::set_num_threads(o.threads);
  } else if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    // As train_gpt does: ranks sharing a node share its cores.
    const int ranks_here = std::max(1, std::atoi(local));
    cpu::set_num_threads(
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here));
  }
  std::string dir;
  if (lead) {
    std::string t = o.dir + "/strata_bench_ckpt_XXXXXX";
    if (!::mkdtemp(t.data())) fail("bench", "mkdtemp in {} failed", o.dir);
    dir = t;
  }
  parallel::broadcast_string(w, dir);

  nn::GptConfig gc;
  gc.n_layer = o.n_layer;
  gc.n_head = std::max(1, o.n_embd / 64);
  gc.n_embd = o.n_embd;
  gc.block_size = o.seq;
  gc.vocab_size = o.vocab;
  nn::Gpt model(gc);
  config::Config cfg;  // fp32 AdamW, lr 1e-4, seed 1
  cfg.train_micro_batch_size_per_gpu = o.micro;
  cfg.gradient_accumulation_steps = 1;
  cfg.optimizer.params.set("lr", 1e-4);
  cfg.strata.seed = 1;
  cfg.zero_optimization.stage = o.stage;
  parallel::Training job(cfg, w, model);
  nn::ParamStore& store = job.store();
  train::Trainer& trainer = job.trainer();
  parallel::DataParallelEngine& engine = job.engine();
  Philox rng(11 + static_cast<std::uint64_t>(w.rank()));
  auto batch = [&](nn::Batch& b) {
    std::int32_t* in = b["tokens"].data<std::int32_t>();
    std::int32_t* tgt = b["targets"].data<std::int32_t>();
    for (int i = 0; i < o.micro * o.seq; ++i) {
      in[i] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint64_t>(o.vocab)));
      tgt[i] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint64_t>(o.vocab)));
    }
  };

  parallel::CheckpointOptions sync_opts;
  sync_opts.root = dir + "/sync";
  sync_opts.retention.save_total_limit = 1;
  parallel::Checkpointer sync(w, w, store, trainer, o.stage, sync_opts);
  std::vector<AsyncVariant> variants;
  for (const std::string& p : o.priorities) {
    parallel::CheckpointOptions ao = sync_opts;
    ao.root = dir + "/async_" + p;
    ao.async = true;
    ::setenv("STRATA_CHECKPOINT_WRITER_PRIORITY", p.c_str(), 1);  // read by the AsyncSaver
    AsyncVariant v;
    v.priority = p;
    v.ckpt = std::make_unique<parallel::Checkpointer>(w, w, store, trainer, o.stage, ao);
    variants.push_back(std::move(v));
    ::unsetenv("STRATA_CHECKPOINT_WRITER_PRIORITY");
  }

  engine.train_step(batch);  // moments exist and are non-zero

  // Save and load, against raw O_DIRECT I/O of this rank's file size; which of the two goes
  // first alternates. Deleting the previous checkpoint (retention) happens in the background; it
  // is waited for outside the timed region, so that its I/O does not land on the next timing.
  std::vector<double> save_s, load_s, raw_w, raw_r, save_ratio, load_ratio;
  std::uint64_t total = 0, mine = 0;  // bytes of all rank files, of this rank's
  for (int k = 1; k <= (o.io ? o.repeats : 0); ++k) {
    parallel::JobState js;
    js.step = k;
    const std::string step_dir = sync_opts.root + "/" + checkpoint::step_dir_name(k);
    const std::string my_file = step_dir + "/" + checkpoint::rank_file_name(w.rank());
    double s = 0, rw = 0, l = 0, rr = 0;
    auto do_save = [&] {
      s = timed(w, [&] { sync.save(js); });
      checkpoint::wait_for_reclaim();
      mine = std::filesystem::file_size(my_file);
      total = checkpoint::read_manifest(step_dir).total_bytes();
    };
    // The raw file has the size of this rank's file (the same every time; the previous repeat's
    // when raw goes first).
    if (k % 2 == 1) do_save();
    RawIo raw(dir + "/" + fmt::format("raw_{:05d}.bin", w.rank()), mine);
    rw = timed(w, [&] { raw.write(); });
    if (k % 2 == 0) do_save();
    drop_cache(my_file);
    if (k % 2 == 1) l = timed(w, [&] { sync.load(step_dir); });
    rr = timed(w, [&] { raw.read(); });
    if (k % 2 == 0) l = timed(w, [&] { sync.load(step_dir); });
    save_s.push_back(s);
    raw_w.push_back(rw);
    load_s.push_back(l);
    raw_r.push_back(rr);
    save_ratio.push_back(rw / s);
    load_ratio.push_back(rr / l);
  }
  const double gb = static_cast<double>(total) / 1e9;

  // Step time without a save, then while a background save is in flight, per writer priority;
  // rounds rotate the order of the variants.
  std::vector<double> plain, cpu_plain;
  engine.train_step(batch);
  int save_step = 1000;
  for (int r = 0; r < (o.steps_part ? o.repeats : 0); ++r) {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      AsyncVariant& v = variants[(i + static_cast<std::size_t>(r)) % variants.size()];
      std::vector<double> round_plain;
      for (int s = 0; s < o.steps; ++s) {
        const double c0 = process_cpu_seconds();
        round_plain.push_back(timed(w, [&] { engine.train_step(batch); }));
        cpu_plain.push_back(process_cpu_seconds() - c0);
      }
      plain.insert(plain.end(), round_plain.begin(), round_plain.end());
      parallel::JobState js;
      js.step = ++save_step;
      const auto t0 = Clock::now();
      v.stage_s.push_back(timed(w, [&] { v.ckpt->save(js); }));
      // Ranks agree whether the save is still in flight, so they run the same number of steps.
      auto any_in_flight = [&] {
        std::int32_t f = v.ckpt->in_flight() ? 1 : 0;
        w.all_reduce(parallel::span(&f, 1), parallel::span(&f, 1), parallel::ReduceOp::max).wait();
        return f != 0;
      };
      std::vector<double> round_during;
      int n = 0;
      while (any_in_flight()) {
        if (n++ == o.max_steps_in_flight) {
          ++v.unfinished;
          break;
        }
        const double c0 = process_cpu_seconds();
        round_during.push_back(timed(w, [&] { engine.train_step(batch); }));
        v.cpu_during.push_back(process_cpu_seconds() - c0);
      }
      v.ckpt->finish();
      v.commit_s.push_back(seconds_since(t0));
      checkpoint::wait_for_reclaim();
      v.during.insert(v.during.end(), round_during.begin(), round_during.end());
      if (!round_during.empty()) v.ratio.push_back(median(round_during) / median(round_plain));
    }
  }

  // CPU time of a background save with nothing else running: staging (the caller's thread), and
  // the rest of the process (writer thread, I/O, communication) until it is committed.
  double stage_cpu = 0, writer_cpu = 0;
  if (!variants.empty()) {
    auto& ck = *variants.front().ckpt;
    for (int r = 0; r < o.repeats; ++r) {
      parallel::JobState js;
      js.step = ++save_step;
      w.barrier().wait();
      const double p0 = process_cpu_seconds();
      timespec t0{}, t1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      ck.save(js);
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
      ck.finish();
      const double staged = static_cast<double>(t1.tv_sec - t0.tv_sec) +
                            static_cast<double>(t1.tv_nsec - t0.tv_nsec) * 1e-9;
      stage_cpu += staged / o.repeats;
      writer_cpu += (process_cpu_seconds() - p0 - staged) / o.repeats;
      checkpoint::wait_for_reclaim();
    }
  }

  if (lead) {
    fmt::print(
        "checkpoint bench: {} rank(s), GPT {} layers d={} vocab {} ({:.1f}M parameters), "
        "ZeRO stage {}, fp32 AdamW, {} compute thread(s) per rank; {:.1f} MB per checkpoint (all "
        "ranks), dir {}, crc32 {}, {} repeats\n",
        w.size(), o.n_layer, o.n_embd, o.vocab, static_cast<double>(store.total_numel()) / 1e6,
        o.stage, cpu::num_threads(), static_cast<double>(total) / 1e6, o.dir,
        checkpoint::crc32_implementation(), o.repeats);
    if (o.io) {
      fmt::print(
          "  save (sync, fsync'd, committed)  median {:.3f} s {:6.2f} GB/s | raw O_DIRECT write "
          "{:.3f} s {:6.2f} GB/s | ratio: median {:.2f} ({}), of bests {:.2f}\n",
          median(save_s), gb / median(save_s), median(raw_w), gb / median(raw_w),
          median(save_ratio), range(save_ratio), best(raw_w) / best(save_s));
      fmt::print(
          "  load (checksummed, resharding)   median {:.3f} s {:6.2f} GB/s | raw O_DIRECT read  "
          "{:.3f} s {:6.2f} GB/s | ratio: median {:.2f} ({}), of bests {:.2f}\n",
          median(load_s), gb / median(load_s), median(raw_r), gb / median(raw_r),
          median(load_ratio), range(load_ratio), best(raw_r) / best(load_s));
    }
    if (o.steps_part)
      fmt::print("  train step without a save: median {:.3f} s, cpu {:.3f} s/step per rank 0\n",
                 median(plain), median(cpu_plain));
    if (!variants.empty())
      fmt::print(
          "  background save, nothing else running (rank 0, writer priority {}): cpu {:.1f} ms "
          "staging on the caller's thread, {:.1f} ms in the rest of the process until "
          "committed\n",
          variants.front().priority, stage_cpu * 1e3, writer_cpu * 1e3);
    for (const AsyncVariant& v : variants)
      if (o.steps_part)
        fmt::print(
            "  train step with a background save in flight, writer priority {:6}: median {:.3f} s "
            "({} steps), x{:.2f} of without (per-round median {:.2f}, {}); cpu {:.3f} s/step; "
            "staging {:.3f} s; committed after {:.2f} s{}\n",
            v.priority, median(v.during), v.during.size(), median(v.during) / median(plain),
            median(v.ratio), range(v.ratio), median(v.cpu_during), median(v.stage_s),
            median(v.commit_s),
            v.unfinished
                ? fmt::format(" ({} saves outlasted {} steps)", v.unfinished, o.max_steps_in_flight)
                : std::string());
  }
  w.barrier().wait();
  if (lead) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_checkpoint: checkpoint save/load throughput vs raw O_DIRECT I/O"};
  Options o;
  app.add_option("--layers", o.n_layer, "GPT layers");
  app.add_option("--embd", o.n_embd, "GPT width");
  app.add_option("--vocab", o.vocab, "vocabulary size");
  app.add_option("--seq", o.seq, "sequence length");
  app.add_option("--micro", o.micro, "micro-batch per rank");
  app.add_option("--stage", o.stage, "ZeRO stage 0-3");
  app.add_option("--repeats", o.repeats, "rounds of each measurement (medians are reported)");
  app.add_option("--steps", o.steps, "training steps timed without a save, per round");
  app.add_option("--max-steps-in-flight", o.max_steps_in_flight,
                 "steps timed while a background save is in flight, at most, per round");
  app.add_option("--priorities", o.priorities,
                 "background writer priorities compared (idle, low, normal)")
      ->delimiter(',');
  bool no_io = false, no_steps = false;
  app.add_flag("--no-io", no_io, "skip the save/load throughput part");
  app.add_flag("--no-steps", no_steps, "skip the step-time part");
  app.add_option("--threads", o.threads,
                 "compute threads per rank (default: the rank's share of the node's cores)");
  app.add_option("--dir", o.dir, "where the checkpoints and raw files go");
  CLI11_PARSE(app, argc, argv);
  o.io = !no_io;
  o.steps_part = !no_steps;
  try {
    parallel::World world;
    return run(o, world.group());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
    return 1;
  }
}
