// Swapper: units of bytes kept in one swap file and brought into a bounded pool of page-aligned
// host buffers on demand (acquire/release, like a tiny buffer cache). Reads ahead the units the
// caller names next into idle buffers, writes modified units back behind it, and orders every
// transfer: a buffer is reused only after its write-back, and a unit is read only after its last
// write-back. Host memory stays at buffer_count × the largest unit. A meta swapper (the memory
// planner's, SwapperOptions::meta) keeps the same buffers, charges and statistics and moves no
// bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "offload/aio.hpp"
#include "offload/host_buffer.hpp"
#include "offload/swap_file.hpp"

namespace strata::offload {

struct SwapperOptions {
  std::string dir;                   // nvme_path
  int rank = 0;                      // in the swap file's name
  std::string what = "optimizer";   // in the swap file's name
  Category category = Category::optimizer;
  int buffer_count = 4;              // host buffers (>= 2)
  bool pin_memory = false;
  AioOptions aio;
  MemoryLedger* ledger = nullptr;    // nullptr: MemoryLedger::global()
  bool meta = false;                 // plan only: charge buffers and file, do no I/O
};

// What the swapper has moved and how long its callers waited for it.
struct SwapStats {
  std::uint64_t bytes_read = 0, bytes_written = 0;
  std::uint64_t reads = 0, writes = 0;
  std::uint64_t acquires = 0;
  std::uint64_t hits = 0;     // acquires of units already resident (or being read ahead)
  double read_wait_s = 0;     // acquire() blocked on a read
  double write_wait_s = 0;    // blocked on a write-back (buffer reuse, flush)
};

class Swapper {
 public:
  explicit Swapper(const SwapperOptions& opts);
  ~Swapper();  // waits for transfers in flight, removes the swap file; never throws
  Swapper(const Swapper&) = delete;
  Swapper& operator=(const Swapper&) = delete;

  // Adds a unit of `bytes` (reserved in the swap file, which reads as zeros until written);
  // returns its index: 0, 1, ... No unit may be acquired while units are added.
  std::size_t add_unit(std::uint64_t bytes);
  // Makes unit u resident and returns its buffer, writable until release(u). `fresh`: the caller
  // overwrites the whole unit, so it is not read. A buffer holding none of `keep` is preferred
  // when u is not resident (the units read ahead for other callers, in the order they need
  // them); else the one holding the unit needed last.
  std::byte* acquire(std::size_t u, bool fresh = false, const std::vector<std::size_t>& keep = {});
  // Done with unit u; `dirty`: write back its first `write_bytes` bytes (rounded up to 4096;
  // default all of it).
  void release(std::size_t u, bool dirty, std::uint64_t write_bytes = UINT64_MAX);
  // Reads ahead the first of `upcoming` units that are not resident, into buffers that are not
  // in use and hold none of them, as far as buffers allow.
  void prefetch(const std::vector<std::size_t>& upcoming);
  // Waits for every write-back submitted so far; throws the first I/O error.
  void flush();
  // Throws the first I/O error of the write-backs complete so far, without waiting for the rest.
  void reap();

  std::size_t num_units() const { return units_.size(); }
  std::uint64_t buffer_bytes() const { return capacity_; }  // each host buffer
  int buffer_count() const { return static_cast<int>(slots_.size()); }
  bool resident(std::size_t u) const { return units_.at(u).slot >= 0; }
  const std::string& path() const { return file_.path(); }
  const SwapFile& file() const { return file_; }
  MemoryLedger& ledger() const { return ledger_; }
  SwapStats stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  struct Slot {
    HostBuffer buf;
    std::int64_t unit = -1;
    bool in_use = false;
    AioQueue::Ticket ticket = 0;  // last transfer into or out of this buffer
    bool ticket_is_write = false;
    std::uint64_t last_used = 0;
  };
  struct Unit {
    std::uint64_t offset = 0, bytes = 0;
    int slot = -1;
    AioQueue::Ticket last_write = 0;
  };

  int pick_slot(const std::vector<std::size_t>& keep) const;
  // The idle slot whose unit comes last in `keep` (or is not in it); -1 if none is idle.
  int furthest_of(const std::vector<std::size_t>& keep) const;
  void attach(std::size_t u, int s, bool read);
  void wait_ticket(AioQueue::Ticket t, bool is_write);
  void check_ok() const;

  SwapperOptions opts_;
  MemoryLedger& ledger_;
  SwapFile file_;
  std::vector<Slot> slots_;
  std::vector<Unit> units_;
  std::vector<AioQueue::Ticket> writes_;  // write-backs not yet known complete
  std::uint64_t capacity_ = 0;
  std::uint64_t clock_ = 0;
  std::string error_;  // first I/O error: the swap file's contents are unknown after it
  SwapStats stats_;
  std::optional<AioQueue> aio_;  // last: destroyed first, draining transfers before the buffers
                                 // and file go; none for a meta swapper
};

}  // namespace strata::offload
