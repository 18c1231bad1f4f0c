#include "offload/host_buffer.hpp"

#include <cstdlib>
#include <utility>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

namespace strata::offload {

HostBuffer::HostBuffer(std::size_t bytes, Category category, bool pinned, MemoryLedger& ledger,
                       bool meta)
    : meta_(meta) {
  const auto size = static_cast<std::size_t>(round_up_io(std::max<std::size_t>(bytes, 1)));
  charge_ = LedgerCharge(ledger, Tier::host, category, size);  // throws OutOfMemory first
  size_ = size;
  if (meta) return;
  if (pinned && cuda::compiled()) {
    data_ = static_cast<std::byte*>(cuda::malloc_pinned(size_));  // page-aligned
    pinned_ = data_ != nullptr;
  }
  if (!data_) data_ = static_cast<std::byte*>(std::aligned_alloc(kIoAlign, size_));
  if (!data_)
    fail("offload", "the operating system refused {} of host memory for {}", format_bytes(size_),
         category_name(category));
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
      pinned_(std::exchange(o.pinned_, false)), meta_(std::exchange(o.meta_, false)),
      charge_(std::move(o.charge_)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    pinned_ = std::exchange(o.pinned_, false);
    meta_ = std::exchange(o.meta_, false);
    charge_ = std::move(o.charge_);
  }
  return *this;
}

HostBuffer::~HostBuffer() { reset(); }

void HostBuffer::reset() {
  if (data_) {
    if (pinned_) cuda::free_pinned(data_);
    else std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
  pinned_ = false;
  meta_ = false;
  charge_.reset();
}

}  // namespace strata::offload
