// HostBuffer: one page-aligned host allocation (usable for O_DIRECT I/O), page-locked when asked
// and CUDA can pin it, charged to the ledger's host tier under a category. A meta buffer (the
// memory planner's) is charged the same and allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/device.hpp"
#include "framework/memory/ledger.hpp"

namespace strata::offload {

// Alignment of host buffers, swap-file offsets and I/O sizes (O_DIRECT needs the logical block
// size; 4096 covers every NVMe/SSD format in use).
inline constexpr std::size_t kIoAlign = 4096;

inline constexpr std::uint64_t round_up_io(std::uint64_t bytes) {
  return (bytes + kIoAlign - 1) / kIoAlign * kIoAlign;
}

class HostBuffer {
 public:
  HostBuffer() = default;
  // Allocates round_up_io(bytes) bytes; throws OutOfMemory when the host tier's cap is exceeded.
  // meta: only the charge (data() is nullptr).
  HostBuffer(std::size_t bytes, Category category, bool pinned, MemoryLedger& ledger,
             bool meta = false);
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool pinned() const { return pinned_; }
  // The device of tensors viewing this buffer: the cpu, or meta for a meta buffer.
  Device device() const { return meta_ ? Device::meta() : Device::cpu(); }
  explicit operator bool() const { return size_ > 0; }
  void reset();

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_ = false;
  bool meta_ = false;
  LedgerCharge charge_;
};

}  // namespace strata::offload
