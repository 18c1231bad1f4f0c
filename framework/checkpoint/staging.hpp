// Staging for asynchronous saves: slices copied into host memory the job owns (charged to the
// ledger as Tier::host, Category::other), so training may overwrite the originals while a
// background thread writes the copies. Each copy is checksummed as it is made (one pass), so the
// writer need not read it again. A StagingArena puts a save's slices back to back in one
// allocation from a 4 KiB boundary, in the order they will be written — the order their bytes
// take in the rank file — so the background writer hands them to the disk with O_DIRECT
// straight from the arena, without copying them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "framework/checkpoint/slice.hpp"
#include "framework/core/tensor.hpp"

namespace strata::checkpoint {

struct StagedSlice {
  std::string kind;
  std::string name;
  Shape global_shape;
  std::int64_t begin = 0, end = 0;
  Tensor data;                 // host, contiguous, end - begin elements
  std::uint32_t checksum = 0;  // CRC-32 of data's bytes
  std::int64_t run = 0, stride = 0;  // a hyperslab's rows (SliceRef)
  SliceRef ref() const;        // with the checksum
};

// Copies a host slice into a buffer of its own.
StagedSlice stage(const SliceRef& s, MemoryLedger& ledger = MemoryLedger::global());
// Copies a tensor of any device (its elements in row-major order are the slice
// [begin, begin + numel) of parameter `name`).
StagedSlice stage(std::string kind, std::string name, Shape global_shape, std::int64_t begin,
                  const Tensor& src, MemoryLedger& ledger = MemoryLedger::global());

class StagingArena {
 public:
  // Room for `bytes` of slices; the memory is charged now and released when the arena and every
  // slice staged in it are gone.
  explicit StagingArena(std::size_t bytes, MemoryLedger& ledger = MemoryLedger::global());
  // Copies a host slice into the next bytes of the arena (into a buffer of its own when it does
  // not fit, or its dtype cannot start there).
  StagedSlice stage(const SliceRef& s);
  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }

 private:
  MemoryLedger* ledger_;
  std::shared_ptr<Storage> storage_;
  std::size_t shift_ = 0;  // bytes from the storage's start to the first 4 KiB boundary
  std::size_t capacity_ = 0, used_ = 0;
};

}  // namespace strata::checkpoint
