// NVMe swap bandwidth of the offload tier (Swapper: io_uring, O_DIRECT, read-ahead/write-behind
// over a pool of host buffers) against raw O_DIRECT sequential pread/pwrite of the same bytes on
// the same disk, measured in the same run.
//
//   build/release/bench/offload/bench_offload_nvme --dir /path/on/nvme [--bytes 2GiB]
//       [--unit 64MiB] [--buffers 4] [--block-size 1MiB] [--queue-depth 8] [--chunk 8MiB,64MiB]
//
// Three swap patterns over units of --unit bytes: write-only (fresh units written back), read-only
// (units read, released clean) and an optimizer step (every unit read, then written back). The
// reference for each is the raw time for the same bytes: bytes_read / raw read bandwidth +
// bytes_written / raw write bandwidth.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"
#include "offload/swapper.hpp"

using namespace strata;
using namespace strata::offload;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Raw {
  double write_bps = 0, read_bps = 0;
};

// Sequential O_DIRECT pwrite then pread of `total` bytes, one call at a time, for each chunk
// size (the kernel splits a call into the device's largest requests); the best of each direction.
Raw raw_bandwidth(const std::string& dir, std::uint64_t total, const std::vector<std::uint64_t>& chunks) {
  const std::string path = dir + "/strata-bench-raw-" + std::to_string(getpid()) + ".bin";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0) user_fail("bench", "cannot open {} with O_DIRECT: {}", path, std::strerror(errno));
  if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(total)); rc != 0)
    user_fail("bench", "cannot reserve {} in {}: {}", format_bytes(total), path, std::strerror(rc));
  Raw best;
  for (const std::uint64_t chunk : chunks) {
    void* buf = std::aligned_alloc(4096, chunk);
    std::memset(buf, 0x42, chunk);
    auto t0 = Clock::now();
    for (std::uint64_t off = 0; off < total; off += chunk)
      if (::pwrite(fd, buf, std::min(chunk, total - off), static_cast<off_t>(off)) < 0)
        user_fail("bench", "pwrite: {}", std::strerror(errno));
    ::fdatasync(fd);
    best.write_bps = std::max(best.write_bps, static_cast<double>(total) / since(t0));
    t0 = Clock::now();
    for (std::uint64_t off = 0; off < total; off += chunk)
      if (::pread(fd, buf, std::min(chunk, total - off), static_cast<off_t>(off)) < 0)
        user_fail("bench", "pread: {}", std::strerror(errno));
    best.read_bps = std::max(best.read_bps, static_cast<double>(total) / since(t0));
    std::free(buf);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"NVMe swap bandwidth vs raw O_DIRECT"};
  std::string dir = ".", bytes_s = "2GiB", unit_s = "64MiB", block_s = "1MiB", chunk_s = "8MiB,64MiB";
  int buffers = 4, qd = 16, threads = 1, reps = 5;
  app.add_option("--dir", dir, "directory on the drive to measure (default .)");
  app.add_option("--bytes", bytes_s, "bytes per pass (default 2GiB)");
  app.add_option("--unit", unit_s, "swap unit size (default 64MiB)");
  app.add_option("--buffers", buffers, "host buffers (buffer_count, default 4)");
  app.add_option("--block-size", block_s, "aio.block_size (default 1MiB)");
  app.add_option("--queue-depth", qd, "aio.queue_depth (default 16)");
  app.add_option("--threads", threads, "aio.thread_count (default 1)");
  app.add_option("--chunk", chunk_s, "raw pread/pwrite sizes, best taken (default 8MiB,64MiB)");
  app.add_option("--reps", reps, "repetitions (median, default 5)");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::uint64_t total = parse_bytes(bytes_s), unit = parse_bytes(unit_s);
    const std::size_t units = static_cast<std::size_t>(std::max<std::uint64_t>(1, total / unit));
    std::vector<std::uint64_t> chunks;
    for (std::size_t a = 0, b; a < chunk_s.size(); a = b + 1) {
      b = chunk_s.find(',', a);
      if (b == std::string::npos) b = chunk_s.size();
      chunks.push_back(parse_bytes(chunk_s.substr(a, b - a)));
    }
    MemoryLedger ledger;
    SwapperOptions o;
    o.dir = dir;
    o.what = "bench";
    o.buffer_count = buffers;
    o.aio.block_size = parse_bytes(block_s);
    o.aio.queue_depth = qd;
    o.aio.thread_count = threads;
    o.ledger = &ledger;
    Swapper sw(o);
    for (std::size_t u = 0; u < units; ++u) sw.add_unit(unit);
    std::printf("swapper: %zu units of %s, %d buffers, io_uring %d x %s, %d thread(s), O_DIRECT %s; "
                "raw reference: O_DIRECT pread/pwrite of %s calls (best), measured before each "
                "repetition\n",
                units, format_bytes(unit).c_str(), buffers, qd, block_s.c_str(), threads,
                sw.file().direct() ? "yes" : "no", chunk_s.c_str());
    // One swap pass over every unit: read (or not), touch, write back (or not).
    auto pass = [&](bool read, bool write, int k) {
      sw.reset_stats();
      std::vector<std::size_t> next;
      const auto t0 = Clock::now();
      for (std::size_t u = 0; u < units; ++u) {
        next.clear();
        for (std::size_t i = 1; i <= static_cast<std::size_t>(buffers); ++i) next.push_back((u + i) % units);
        std::byte* b = sw.acquire(u, !read);
        std::memset(b, static_cast<int>(u + k), 64);  // touch
        if (read) sw.prefetch(next);
        sw.release(u, write);
        if (read) sw.prefetch(next);
      }
      sw.flush();
      return since(t0);
    };
    struct Pass {
      const char* name;
      bool read, write;
      std::vector<double> secs, ratio, raw_w, raw_r;
      SwapStats stats;
    };
    std::vector<Pass> passes = {{"write-only (fresh)", false, true, {}, {}, {}, {}, {}},
                                {"read-only", true, false, {}, {}, {}, {}, {}},
                                {"read + write-back", true, true, {}, {}, {}, {}, {}}};
    for (int k = 0; k < reps; ++k) {
      for (auto& p : passes) {
        const Raw raw = raw_bandwidth(dir, units * unit, chunks);
        const double secs = pass(p.read, p.write, k);
        p.stats = sw.stats();
        const double ref = static_cast<double>(p.stats.bytes_read) / raw.read_bps +
                           static_cast<double>(p.stats.bytes_written) / raw.write_bps;
        p.secs.push_back(secs);
        p.ratio.push_back(ref / secs);
        p.raw_w.push_back(raw.write_bps);
        p.raw_r.push_back(raw.read_bps);
      }
    }
    for (auto& p : passes) {
      const double secs = median(p.secs);
      std::printf("  %-20s read %s, wrote %s in %.2f s: %5.0f MB/s; raw O_DIRECT write %.0f / read "
                  "%.0f MB/s: swap = %3.0f%% of raw for the same bytes (median of %d)\n",
                  p.name, format_bytes(p.stats.bytes_read).c_str(),
                  format_bytes(p.stats.bytes_written).c_str(), secs,
                  static_cast<double>(p.stats.bytes_read + p.stats.bytes_written) / secs / 1e6,
                  median(p.raw_w) / 1e6, median(p.raw_r) / 1e6, 100 * median(p.ratio), reps);
    }
    std::printf("  host buffers peak %s (%d x %s)\n",
                format_bytes(ledger.peak(Tier::host)).c_str(), buffers, format_bytes(sw.buffer_bytes()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_offload_nvme: %s\n", e.what());
    return 1;
  }
  return 0;
}
