// Helpers shared by the offload unit tests: a scratch directory under the system temp dir that is
// removed afterwards, small swapper options, and deterministic state updates.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "framework/train/state_store.hpp"
#include "offload/swapper.hpp"

namespace strata::offload::test {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("strata-offload-{}-{}-{}", tag, static_cast<long>(getpid()), n++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }
  std::size_t files() const {
    std::size_t k = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(path_)) ++k;
    return k;
  }

 private:
  std::filesystem::path path_;
};

// The StateLayout of AdamW's state over n elements (m, v: f32 each; SGD's momentum alone without
// second_moment), with an f32 master copy when `master`.
inline train::StateLayout adam_layout(std::int64_t n, bool master, bool second_moment = true) {
  train::StateLayout l{n, master, {{DType::f32, n}}};
  if (second_moment) l.tensors.push_back({DType::f32, n});
  return l;
}

// Options of a swapper in `dir` with `buffers` host buffers and small (8 KiB) requests, so that
// even small units take several requests; bytes charged to `ledger`.
inline SwapperOptions small_swapper(const ScratchDir& dir, int buffers, MemoryLedger* ledger) {
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = buffers;
  o.aio.block_size = 8192;
  o.ledger = ledger;
  return o;
}

// A deterministic, unit- and step-dependent value for element i.
inline float pattern(int step, std::size_t unit, std::size_t i, int which) {
  const auto h = static_cast<std::uint32_t>((step * 7919 + static_cast<int>(unit) * 104729 +
                                             static_cast<int>(i) * 31 + which * 17) % 2003);
  return static_cast<float>(h) / 1024.0f - 0.97f;
}

}  // namespace strata::offload::test
