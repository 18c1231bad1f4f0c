#include "offload/swapper.hpp"

#include <algorithm>
#include <chrono>

#include "framework/core/error.hpp"

namespace strata::offload {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

namespace {
const SwapperOptions& checked(const SwapperOptions& o) {
  if (o.buffer_count < 2)
    user_fail("offload", "buffer_count {} for the NVMe tier must be at least 2 (one buffer being "
              "updated while the next is read)", o.buffer_count);
  return o;
}
}  // namespace

Swapper::Swapper(const SwapperOptions& o)
    : opts_(checked(o)),
      ledger_(o.ledger ? *o.ledger : MemoryLedger::global()),
      file_(o.dir, o.rank, o.what, o.category, ledger_, o.meta),
      slots_(static_cast<std::size_t>(o.buffer_count)) {
  if (!o.meta) aio_.emplace(o.aio);
}

Swapper::~Swapper() = default;

void Swapper::check_ok() const {
  if (!error_.empty()) throw Error("offload", error_);
}

void Swapper::wait_ticket(AioQueue::Ticket t, bool is_write) {
  if (t == 0 || aio_->done(t)) {
    if (t != 0) {
      try {
        aio_->wait(t);
      } catch (const Error& e) {
        error_ = std::string(e.what()).substr(std::string("[offload] ").size());
        throw;
      }
    }
    return;
  }
  const auto t0 = Clock::now();
  try {
    aio_->wait(t);
  } catch (const Error& e) {
    error_ = std::string(e.what()).substr(std::string("[offload] ").size());
    throw;
  }
  (is_write ? stats_.write_wait_s : stats_.read_wait_s) += since(t0);
}

std::size_t Swapper::add_unit(std::uint64_t bytes) {
  check_ok();
  const std::uint64_t b = round_up_io(std::max<std::uint64_t>(bytes, 1));
  for (const auto& s : slots_)
    STRATA_CHECK(!s.in_use, "offload", "units added to {} while unit {} is in use", path(), s.unit);
  Unit un;
  un.bytes = b;
  un.offset = file_.grow(b);
  if (b > capacity_) {
    // Larger buffers: drop the (clean or written) units they hold; reallocated on next use.
    capacity_ = b;
    for (auto& s : slots_) {
      if (!s.buf || s.buf.size() >= capacity_) continue;
      wait_ticket(s.ticket, s.ticket_is_write);
      if (s.unit >= 0) units_[static_cast<std::size_t>(s.unit)].slot = -1;
      s = Slot{};
    }
  }
  units_.push_back(un);
  return units_.size() - 1;
}

int Swapper::pick_slot(const std::vector<std::size_t>& keep) const {
  int best = -1;
  for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
    const Slot& s = slots_[static_cast<std::size_t>(i)];
    if (s.in_use) continue;
    if (s.unit >= 0 &&
        std::find(keep.begin(), keep.end(), static_cast<std::size_t>(s.unit)) != keep.end())
      continue;
    if (s.unit < 0) return i;  // empty: best
    if (best < 0 || s.last_used < slots_[static_cast<std::size_t>(best)].last_used) best = i;
  }
  return best;
}

int Swapper::furthest_of(const std::vector<std::size_t>& keep) const {
  int best = -1;
  std::ptrdiff_t best_at = -1;
  for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
    const Slot& s = slots_[static_cast<std::size_t>(i)];
    if (s.in_use || s.unit < 0) continue;
    const auto at = std::find(keep.begin(), keep.end(), static_cast<std::size_t>(s.unit)) - keep.begin();
    if (at > best_at) best = i, best_at = at;
  }
  return best;
}

void Swapper::attach(std::size_t u, int si, bool read) {
  Slot& s = slots_[static_cast<std::size_t>(si)];
  Unit& un = units_[u];
  if (s.unit >= 0) units_[static_cast<std::size_t>(s.unit)].slot = -1;  // evict (clean or written)
  if (!s.buf || s.buf.size() < capacity_) {
    wait_ticket(s.ticket, s.ticket_is_write);
    s.buf = HostBuffer(capacity_, opts_.category, opts_.pin_memory, ledger_, opts_.meta);
    s.ticket = 0;
  }
  s.unit = static_cast<std::int64_t>(u);
  s.last_used = ++clock_;
  un.slot = si;
  if (read) {
    // After the buffer's last transfer and after this unit's last write-back.
    if (aio_)
      s.ticket = aio_->submit(IoOp::read, file_.fd(), file_.path(), s.buf.data(), un.bytes,
                              un.offset, {s.ticket, un.last_write});
    s.ticket_is_write = false;
    stats_.reads += 1;
    stats_.bytes_read += un.bytes;
  }
}

std::byte* Swapper::acquire(std::size_t u, bool fresh, const std::vector<std::size_t>& keep) {
  check_ok();
  STRATA_CHECK(u < units_.size(), "offload", "unit {} of {} in {}", u, units_.size(), path());
  Unit& un = units_[u];
  ++stats_.acquires;
  if (un.slot < 0) {
    int s = keep.empty() ? -1 : pick_slot(keep);
    if (s < 0 && !keep.empty()) s = furthest_of(keep);  // the read-ahead needed last
    if (s < 0) s = pick_slot({});
    if (s < 0)
      fail("offload", "all {} buffers of {} are in use: release a unit before acquiring unit {}",
           slots_.size(), path(), u);
    attach(u, s, !fresh);
  } else {
    ++stats_.hits;
  }
  Slot& s = slots_[static_cast<std::size_t>(un.slot)];
  STRATA_CHECK(!s.in_use, "offload", "unit {} of {} acquired twice", u, path());
  wait_ticket(s.ticket, s.ticket_is_write);  // the read, or a write-back still reading the buffer
  s.in_use = true;
  s.last_used = ++clock_;
  return s.buf.data();
}

void Swapper::release(std::size_t u, bool dirty, std::uint64_t write_bytes) {
  STRATA_CHECK(u < units_.size() && units_[u].slot >= 0 &&
                   slots_[static_cast<std::size_t>(units_[u].slot)].in_use,
               "offload", "unit {} of {} released but not acquired", u, path());
  Unit& un = units_[u];
  Slot& s = slots_[static_cast<std::size_t>(un.slot)];
  s.in_use = false;
  s.last_used = ++clock_;
  if (!dirty || !error_.empty()) return;
  const std::uint64_t n = std::min(un.bytes, round_up_io(write_bytes == UINT64_MAX ? un.bytes : write_bytes));
  if (n == 0) return;
  stats_.writes += 1;
  stats_.bytes_written += n;
  if (!aio_) return;  // meta: counted, not written
  s.ticket = aio_->submit(IoOp::write, file_.fd(), file_.path(), s.buf.data(), n, un.offset,
                          {s.ticket, un.last_write});
  s.ticket_is_write = true;
  un.last_write = s.ticket;
  writes_.push_back(s.ticket);
  // Forget completed write-backs now and then (their errors are raised where they are waited).
  if (writes_.size() > 4 * slots_.size() + 16) {
    std::vector<AioQueue::Ticket> left;
    for (auto t : writes_) {
      if (!aio_->done(t)) left.push_back(t);
      else wait_ticket(t, true);  // returns at once; throws if it failed
    }
    writes_.swap(left);
  }
}

void Swapper::prefetch(const std::vector<std::size_t>& upcoming) {
  if (!error_.empty()) return;  // reported by the next acquire/flush
  std::size_t idle = 0;
  for (const auto& s : slots_) idle += s.in_use ? 0 : 1;
  std::vector<std::size_t> window;
  for (std::size_t v : upcoming) {
    if (window.size() >= idle) break;
    if (v >= units_.size()) continue;
    if (units_[v].slot >= 0 && slots_[static_cast<std::size_t>(units_[v].slot)].in_use) continue;
    window.push_back(v);
  }
  for (std::size_t v : window) {
    if (units_[v].slot >= 0) continue;
    const int s = pick_slot(window);
    if (s < 0) break;
    attach(v, s, true);
  }
}

void Swapper::reap() {
  check_ok();
  if (!aio_) return;
  std::vector<AioQueue::Ticket> left;
  for (auto t : writes_) {
    if (!aio_->done(t)) left.push_back(t);
    else wait_ticket(t, true);  // returns at once; throws if it failed
  }
  writes_.swap(left);
}

void Swapper::flush() {
  check_ok();
  const auto ws = std::move(writes_);
  writes_.clear();
  for (auto t : ws) wait_ticket(t, true);
}

}  // namespace strata::offload
