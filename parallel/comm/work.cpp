#include "parallel/comm/work.hpp"

#include <algorithm>
#include <thread>

#include "framework/core/error.hpp"

namespace strata::parallel {

using Clock = std::chrono::steady_clock;

WorkState::WorkState(OpDesc op, std::string group, std::chrono::milliseconds timeout)
    : op_(op), group_(std::move(group)), timeout_(timeout) {}

void WorkState::complete() {
  // The operation no longer touches its buffers: drop the references that kept them alive before
  // anyone can see it complete, so a waiter that then lets go of its tensors frees them (the
  // progress thread may hold this state a little longer).
  std::vector<std::shared_ptr<const void>> kept;
  {
    std::lock_guard lk(mu_);
    if (done_.load()) return;
    kept.swap(keep_);
  }
  kept.clear();
  {
    std::lock_guard lk(mu_);
    if (done_.load()) return;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void WorkState::fail(std::exception_ptr e) {
  {
    std::lock_guard lk(mu_);
    if (done_.load()) return;
    error_ = std::move(e);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void WorkState::fail(const std::string& why) {
  fail(std::make_exception_ptr(
      Error("comm", fmt::format("{} on {} failed: {}", op_.str(), group_, why))));
}

void WorkState::set_poll(std::function<bool()> poll) {
  std::lock_guard lk(mu_);
  poll_ = std::move(poll);
}

void WorkState::set_driver(std::shared_ptr<ProgressDriver> d, std::chrono::milliseconds spin) {
  std::lock_guard lk(mu_);
  driver_ = std::move(d);
  spin_ = spin;
}

void WorkState::set_explain(Explain e) {
  std::lock_guard lk(mu_);
  explain_ = std::move(e);
}

void WorkState::set_device_event(Event done) {
  std::lock_guard lk(mu_);
  device_done_ = std::move(done);
  has_device_event_ = true;
}

void WorkState::keep_alive(std::shared_ptr<const void> p) {
  std::lock_guard lk(mu_);
  if (done_.load() && !error_) return;  // completed: the buffers are no longer in use
  keep_.push_back(std::move(p));
}

bool WorkState::is_completed() {
  if (done_.load(std::memory_order_acquire)) return true;
  std::function<bool()> poll;
  {
    std::lock_guard lk(mu_);
    poll = poll_;
  }
  if (poll) {
    bool ok = false;
    try {
      ok = poll();
    } catch (...) {
      fail(std::current_exception());
      return true;
    }
    if (ok) complete();
    return ok;
  }
  return false;
}

void WorkState::wait(std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto deadline =
      timeout >= std::chrono::hours(24 * 365) ? Clock::time_point::max() : start + timeout;
  std::shared_ptr<ProgressDriver> driver;
  std::chrono::milliseconds spin;
  {
    std::lock_guard lk(mu_);
    driver = driver_;
    spin = spin_;
  }
  // Phase 1: drive progress ourselves (lowest latency, like MPI_Wait) for up to `spin`.
  if (driver && !done_.load(std::memory_order_acquire)) {
    const auto spin_end = std::min(deadline, start + spin);
    driver->begin_drive();
    try {
      // No yield between steps: like MPI_Wait, a waiter keeps its core while the call moves.
      while (!done_.load(std::memory_order_acquire) && Clock::now() < spin_end) driver->step();
    } catch (...) {
      driver->end_drive();
      throw;
    }
    driver->end_drive();
  }
  // Phase 2: sleep until signalled (or poll, for completion found by polling).
  while (!is_completed()) {
    const auto now = Clock::now();
    if (now >= deadline) throw_timeout(timeout);
    std::unique_lock lk(mu_);
    const auto step = poll_ ? std::chrono::microseconds(200) : std::chrono::microseconds(50000);
    const auto until = std::min(deadline, now + step);
    cv_.wait_until(lk, until, [&] { return done_.load(std::memory_order_acquire); });
  }
  std::exception_ptr e;
  {
    std::lock_guard lk(mu_);
    e = error_;
  }
  if (e) std::rethrow_exception(e);
}

void WorkState::throw_timeout(std::chrono::milliseconds timeout) {
  Explain explain;
  {
    std::lock_guard lk(mu_);
    explain = explain_;
  }
  std::string detail;
  if (explain) {
    // Give peers a bounded time (1 to 5 s) to say where they are.
    auto budget =
        std::clamp(timeout / 4, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
    try {
      detail = explain(budget);
    } catch (const std::exception& e) {
      detail = fmt::format("(could not ask the other ranks: {})", e.what());
    }
  }
  strata::fail("comm", "{} on {} did not complete within {} ms{}{}", op_.str(), group_,
               timeout.count(), detail.empty() ? "" : ": ", detail);
}

bool Work::is_completed() const {
  return !s_ || s_->is_completed();
}

void Work::wait(std::chrono::milliseconds timeout) const {
  if (s_) s_->wait(timeout);
}

void Work::wait() const {
  if (s_) s_->wait(s_->timeout());
}

void Work::wait_on(const Stream& stream) const {
  if (!s_) return;
  // A call already found complete needs no device wait (its event may serve a later call by now:
  // transports recycle them); wait() then returns at once, or throws its failure.
  if (const Event* e = s_->device_event(); e && stream.device().is_cuda() && !s_->is_completed()) {
    e->wait(stream);  // the device waits; errors surface at the next host wait
    return;
  }
  wait();
}

void wait_all(const std::vector<Work>& works) {
  for (const auto& w : works) w.wait();
}

}  // namespace strata::parallel
