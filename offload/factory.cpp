#include "offload/factory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/memory/size.hpp"
#include "offload/aio.hpp"
#include "offload/host_buffer.hpp"
#include "offload/host_state_store.hpp"
#include "offload/nvme_state_store.hpp"

namespace strata::offload {

namespace fs = std::filesystem;
using config::OffloadDevice;

namespace {

// True when `inner` is `outer` or lies below it.
bool inside(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(fs::absolute(inner, ec), ec);
  const fs::path b = fs::weakly_canonical(fs::absolute(outer, ec), ec);
  auto ia = a.begin(), ib = b.begin();
  for (; ib != b.end(); ++ia, ++ib) {
    if (ib->empty()) continue;  // trailing separator
    if (ia == a.end() || *ia != *ib) return false;
  }
  return true;
}

// nvme_path must be a directory we can create files in with O_DIRECT (machine: checked on this
// machine, else only that it is set).
void check_nvme_dir(const std::string& key, const std::string& dir, const config::Config& cfg,
                    bool machine) {
  if (dir.empty())
    user_fail("offload", "{}.device is \"nvme\" but {}.nvme_path is not set: give a directory on "
              "the NVMe drive", key, key);
  if (!machine) return;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    user_fail("offload", "{}.nvme_path {} is a file, not a directory: point it at a directory on "
              "the NVMe drive", key, dir);
  fs::create_directories(dir, ec);
  if (ec) user_fail("offload", "{}.nvme_path {} cannot be created: {}", key, dir, ec.message());
  const std::string& ckpt = cfg.strata.checkpoint.dir;
  if (!ckpt.empty() && inside(dir, ckpt))
    user_fail("offload", "{}.nvme_path {} is inside strata.checkpoint.dir {}: swap files must "
              "never live among checkpoints (a failing swap must leave the last checkpoint "
              "untouched); use a separate directory", key, dir, ckpt);
  const std::string probe = (fs::path(dir) / fmt::format(".strata-probe-{}", getpid())).string();
  int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EINVAL) fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    user_fail("offload", "{}.nvme_path {} is not writable: {}", key, dir, std::strerror(errno));
  void* buf = std::aligned_alloc(kIoAlign, kIoAlign);
  std::memset(buf, 0, kIoAlign);
  const ssize_t w = ::pwrite(fd, buf, kIoAlign, 0);
  const int e = errno;
  std::free(buf);
  ::close(fd);
  ::unlink(probe.c_str());
  if (w != static_cast<ssize_t>(kIoAlign))
    user_fail("offload", "{}.nvme_path {}: a test write failed: {}", key, dir,
              w < 0 ? std::strerror(e) : "short write");
}

}  // namespace

SwapperOptions swapper_options(const config::Config& cfg, const std::string& dir, int rank,
                               std::int64_t buffer_count, bool pin, const TensorOptions& memory) {
  SwapperOptions o;
  o.dir = dir;
  o.rank = rank;
  o.buffer_count = static_cast<int>(buffer_count);
  o.pin_memory = pin;
  o.aio = aio_options(cfg.aio);
  o.ledger = memory.ledger;
  o.meta = memory.device.is_meta();
  return o;
}

void validate(const config::Config& cfg, int zero_stage, bool check_machine) {
  const auto& z = cfg.zero_optimization;
  const auto& oo = z.offload_optimizer;
  const auto& op = z.offload_param;
  if (oo.device != OffloadDevice::none && zero_stage < 1)
    user_fail("offload", "zero_optimization.offload_optimizer.device is \"{}\" but ZeRO stage {} "
              "is in use; optimizer offload needs zero_optimization.stage >= 1",
              config::to_string(oo.device), zero_stage);
  if (op.device != OffloadDevice::none && zero_stage != 3)
    user_fail("offload", "zero_optimization.offload_param.device is \"{}\" but ZeRO stage {} is "
              "in use; parameter offload needs zero_optimization.stage = 3 (only stage 3 keeps "
              "parameters as owned slices between uses)",
              config::to_string(op.device), zero_stage);
  const bool any_nvme = oo.device == OffloadDevice::nvme || op.device == OffloadDevice::nvme;
  if (any_nvme && cfg.aio.block_size % static_cast<std::int64_t>(kIoAlign) != 0)
    user_fail("offload", "aio.block_size {} must be a multiple of {} for the NVMe tier (O_DIRECT)",
              cfg.aio.block_size, kIoAlign);
  if (op.device == OffloadDevice::nvme) {
    if (op.buffer_count < 2)
      user_fail("offload", "zero_optimization.offload_param.buffer_count is {}; the NVMe tier "
                "needs at least 2 (one unit's slice in use while the next is read)",
                op.buffer_count);
    // The NVMe store sizes its buffer_count buffers to the largest unit's slice and keeps no
    // other slices in host memory: DeepSpeed's buffer_size / max_in_cpu would be ignored.
    const config::OffloadParam defaults;
    if (op.buffer_size != defaults.buffer_size)
      user_fail("offload", "zero_optimization.offload_param.buffer_size {} is not supported: "
                "Strata sizes each of the buffer_count buffers to the largest unit's parameter "
                "slice; remove buffer_size (or set it to {})", op.buffer_size, defaults.buffer_size);
    if (op.max_in_cpu != defaults.max_in_cpu)
      user_fail("offload", "zero_optimization.offload_param.max_in_cpu {} is not supported: host "
                "memory for parameters is buffer_count x the largest unit's slice; remove "
                "max_in_cpu (or set it to {}) and bound host memory with buffer_count",
                op.max_in_cpu, defaults.max_in_cpu);
    check_nvme_dir("zero_optimization.offload_param", op.nvme_path, cfg, check_machine);
    if (check_machine) check_io_uring_available();
  }
  if (oo.device == OffloadDevice::nvme) {
    if (oo.buffer_count < 2)
      user_fail("offload", "zero_optimization.offload_optimizer.buffer_count is {}; the NVMe tier "
                "needs at least 2 (one unit updated while the next is read)", oo.buffer_count);
    check_nvme_dir("zero_optimization.offload_optimizer", oo.nvme_path, cfg, check_machine);
    if (check_machine) check_io_uring_available();
  }
}

std::unique_ptr<train::OptimizerStateStore> make_state_store(const config::Config& cfg, int rank,
                                                             const TensorOptions& memory) {
  const auto& oo = cfg.zero_optimization.offload_optimizer;
  switch (oo.device) {
    case OffloadDevice::none:
      return nullptr;
    case OffloadDevice::cpu:
      return std::make_unique<HostStateStore>(oo.pin_memory, memory.ledger,
                                              memory.device.is_meta());
    case OffloadDevice::nvme:
      return std::make_unique<NvmeStateStore>(
          swapper_options(cfg, oo.nvme_path, rank, oo.buffer_count, oo.pin_memory, memory));
  }
  return nullptr;
}

namespace {
std::string pin_note(bool pin) {
  return pin ? (cuda::compiled() ? ", pinned" : ", pin_memory (no CUDA: plain)") : "";
}
std::string nvme_note(const config::Config& cfg, const std::string& path, std::int64_t buffers,
                      bool pin) {
  return fmt::format("nvme ({}, {} buffers{}, io_uring {} x {} x {} thread(s))", path, buffers,
                     pin_note(pin), cfg.aio.queue_depth,
                     format_bytes(static_cast<std::uint64_t>(cfg.aio.block_size)),
                     cfg.aio.thread_count);
}
}  // namespace

std::string describe(const config::Config& cfg) {
  const auto& oo = cfg.zero_optimization.offload_optimizer;
  const auto& op = cfg.zero_optimization.offload_param;
  std::string out = "optimizer state on ";
  switch (oo.device) {
    case OffloadDevice::none: out += "the device"; break;
    case OffloadDevice::cpu: out += "the host" + pin_note(oo.pin_memory); break;
    case OffloadDevice::nvme: out += nvme_note(cfg, oo.nvme_path, oo.buffer_count, oo.pin_memory); break;
  }
  // Gradient offload comes with optimizer offload: the gradients go where the optimizer reads them.
  switch (oo.device) {
    case OffloadDevice::none: out += "; gradients on the device"; break;
    case OffloadDevice::cpu: out += "; gradients on the host"; break;
    case OffloadDevice::nvme: out += "; gradients on nvme (a grads swap file beside it)"; break;
  }
  out += "; parameters ";
  switch (op.device) {
    case OffloadDevice::none:
      out += cfg.zero_optimization.stage >= 3 ? "as owned slices on the device" : "on the device";
      break;
    case OffloadDevice::cpu: out += "as owned slices on the host" + pin_note(op.pin_memory); break;
    case OffloadDevice::nvme:
      out += "as owned slices on " + nvme_note(cfg, op.nvme_path, op.buffer_count, op.pin_memory);
      break;
  }
  return out;
}

}  // namespace strata::offload
