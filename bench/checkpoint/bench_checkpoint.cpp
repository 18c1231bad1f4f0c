// bench_checkpoint: checkpoint save and load throughput of a GPT's sharded training state (all
// ranks together) against a raw sequential O_DIRECT write and read of the same number of bytes
// to the same directory in the same run, and the training step time while a background save is
// in flight against without. Run under mpirun -np N; prints ratios.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/checkpointing.hpp"
#include "parallel/engine/dp_engine.hpp"
#include "parallel/engine/rank_agreement.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int n_layer = 6, n_embd = 384, vocab = 8192, seq = 64, micro = 2, stage = 1;
  int repeats = 3, steps = 6, threads = 0;
  std::string dir = "/tmp";
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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

double best(std::vector<double> v) {
  return *std::min_element(v.begin(), v.end());
}

int run(const Options& o, const parallel::Group& w) {
  const bool lead = w.rank() == 0;
  if (o.threads > 0) cpu::set_num_threads(o.threads);
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
  nn::ParamStore store(model.units(), parallel::ZeroHooks::store_options({}, o.stage, w));
  store.initialize(1);
  train::TrainerOptions to;
  to.adamw.lr = 1e-4;
  train::Trainer trainer(store, to,
                         o.stage > 0 ? parallel::dp_reductions(w) : train::ShardReductions{});
  parallel::EngineOptions eo;
  eo.micro_batch = o.micro;
  eo.seq_len = o.seq;
  eo.zero.stage = o.stage;
  parallel::DataParallelEngine engine(w, model, store, trainer, eo);
  Philox rng(11 + static_cast<std::uint64_t>(w.rank()));
  auto batch = [&](std::int32_t* in, std::int32_t* tgt) {
    for (int i = 0; i < o.micro * o.seq; ++i) {
      in[i] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint64_t>(o.vocab)));
      tgt[i] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint64_t>(o.vocab)));
    }
  };

  parallel::CheckpointOptions sync_opts;
  sync_opts.root = dir + "/sync";
  sync_opts.retention.save_total_limit = 1;
  parallel::Checkpointer sync(w, w, store, trainer, o.stage, sync_opts);
  parallel::CheckpointOptions async_opts = sync_opts;
  async_opts.root = dir + "/async";
  async_opts.async = true;
  parallel::Checkpointer async(w, w, store, trainer, o.stage, async_opts);

  engine.train_step(batch);  // moments exist and are non-zero

  // Save and load, against raw O_DIRECT I/O of this rank's file size.
  std::vector<double> save_s, load_s, raw_w, raw_r;
  std::uint64_t total = 0, mine = 0;
  for (int k = 1; k <= o.repeats; ++k) {
    parallel::JobState js;
    js.step = k;
    save_s.push_back(timed(w, [&] { sync.save(js); }));
    const std::string step_dir = sync_opts.root + "/" + checkpoint::step_dir_name(k);
    const std::string my_file = step_dir + "/" + checkpoint::rank_file_name(w.rank());
    mine = std::filesystem::file_size(my_file);
    total = checkpoint::read_manifest(step_dir).total_bytes();
    drop_cache(my_file);
    load_s.push_back(timed(w, [&] { sync.load(step_dir); }));
    RawIo raw(dir + "/" + fmt::format("raw_{:05d}.bin", w.rank()), mine);
    raw_w.push_back(timed(w, [&] { raw.write(); }));
    raw_r.push_back(timed(w, [&] { raw.read(); }));
  }
  const double gb = static_cast<double>(total) / 1e9;
  const double sv = gb / best(save_s), ld = gb / best(load_s);
  const double rw = gb / best(raw_w), rr = gb / best(raw_r);

  // Step time without a save, then while a background save is in flight.
  std::vector<double> plain, during;
  for (int s = 0; s < o.steps; ++s) plain.push_back(timed(w, [&] { engine.train_step(batch); }));
  double stage_s = 0, total_async = 0;
  for (int k = 0; k < o.repeats; ++k) {
    parallel::JobState js;
    js.step = 100 + k;
    const auto t0 = Clock::now();
    stage_s += timed(w, [&] { async.save(js); });
    // Ranks agree whether any save is still in flight, so they run the same number of steps.
    auto any_in_flight = [&] {
      std::int32_t f = async.in_flight() ? 1 : 0;
      w.all_reduce(parallel::span(&f, 1), parallel::span(&f, 1), parallel::ReduceOp::max).wait();
      return f != 0;
    };
    while (any_in_flight()) during.push_back(timed(w, [&] { engine.train_step(batch); }));
    async.finish();
    total_async += seconds_since(t0);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };

  if (lead) {
    fmt::print(
        "checkpoint bench: {} rank(s), GPT {} layers d={} vocab {} ({:.1f}M parameters), "
        "ZeRO stage {}, fp32 AdamW; {:.1f} MB per checkpoint (all ranks), dir {}\n",
        w.size(), o.n_layer, o.n_embd, o.vocab, static_cast<double>(store.total_numel()) / 1e6,
        o.stage, static_cast<double>(total) / 1e6, o.dir);
    fmt::print(
        "  save (sync, fsync'd, committed)  {:7.3f} s  {:7.2f} GB/s | raw O_DIRECT write {:7.3f} s "
        " "
        "{:7.2f} GB/s | ratio {:.2f}\n",
        best(save_s), sv, best(raw_w), rw, sv / rw);
    fmt::print(
        "  load (checksummed, resharding)   {:7.3f} s  {:7.2f} GB/s | raw O_DIRECT read  {:7.3f} s "
        " "
        "{:7.2f} GB/s | ratio {:.2f}\n",
        best(load_s), ld, best(raw_r), rr, ld / rr);
    fmt::print(
        "  train step: {:.3f} s without a save, {:.3f} s with a background save in flight "
        "({} steps): ratio {:.2f}\n",
        mean(plain), mean(during), during.size(),
        mean(plain) > 0 ? mean(during) / mean(plain) : 0.0);
    fmt::print("  async save: {:.3f} s blocking (staging copies), {:.3f} s until committed\n",
               stage_s / o.repeats, total_async / o.repeats);
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
  app.add_option("--repeats", o.repeats, "saves/loads measured (best is reported)");
  app.add_option("--steps", o.steps, "training steps timed without a save");
  app.add_option("--threads", o.threads, "compute threads per rank (default: all cores)");
  app.add_option("--dir", o.dir, "where the checkpoints and raw files go");
  CLI11_PARSE(app, argc, argv);
  try {
    parallel::World world;
    return run(o, world.group());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
    return 1;
  }
}
