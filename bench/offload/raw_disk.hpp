// Raw O_DIRECT sequential bandwidth of a directory's disk, the reference the offload benchmarks
// compare the NVMe tier's swapping against (measured in the same run: this disk's speed drifts).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

namespace strata::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Raw {
  double write_bps = 0, read_bps = 0;
};

// Sequential O_DIRECT pwrite then pread of `total` bytes, one call at a time, for each chunk
// size (the kernel splits a call into the device's largest requests); the best of each direction.
inline Raw raw_bandwidth(const std::string& dir, std::uint64_t total,
                         const std::vector<std::uint64_t>& chunks) {
  const std::string path = dir + "/strata-bench-raw-" + std::to_string(getpid()) + ".bin";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0) user_fail("bench", "cannot open {} with O_DIRECT: {}", path, std::strerror(errno));
  if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(total)); rc != 0)
    user_fail("bench", "cannot reserve {} in {}: {}", format_bytes(total), path, std::strerror(rc));
  Raw best;
  for (const std::uint64_t chunk : chunks) {
    void* buf = std::aligned_alloc(4096, chunk);
    std::memset(buf, 0x42, chunk);
    auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t off = 0; off < total; off += chunk)
      if (::pwrite(fd, buf, std::min(chunk, total - off), static_cast<off_t>(off)) < 0)
        user_fail("bench", "pwrite: {}", std::strerror(errno));
    ::fdatasync(fd);
    best.write_bps = std::max(best.write_bps, static_cast<double>(total) / seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    for (std::uint64_t off = 0; off < total; off += chunk)
      if (::pread(fd, buf, std::min(chunk, total - off), static_cast<off_t>(off)) < 0)
        user_fail("bench", "pread: {}", std::strerror(errno));
    best.read_bps = std::max(best.read_bps, static_cast<double>(total) / seconds_since(t0));
    std::free(buf);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return best;
}

}  // namespace strata::bench
