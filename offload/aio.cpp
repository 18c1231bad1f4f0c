#include "offload/aio.hpp"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "framework/config/config.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

namespace strata::offload {

namespace {

const char* op_name(IoOp op) { return op == IoOp::read ? "read" : "write"; }

std::string describe_errno(IoOp op, const std::string& path, std::uint64_t offset,
                           std::uint64_t bytes, int err) {
  std::string m = fmt::format("{} of {} at offset {} of {} failed: {} (errno {})", op_name(op),
                              format_bytes(bytes), offset, path, std::strerror(err), err);
  if (err == ENOSPC || err == EDQUOT)
    m += "; the drive holding this swap file is full: free space there or point nvme_path at a "
         "larger drive";
  else if (err == EIO)
    m += "; the drive reported an I/O error (check dmesg / the drive's health)";
  else if (err == EINVAL)
    m += "; the file system may not support O_DIRECT with these alignments";
  return m;
}

}  // namespace

AioOptions aio_options(const config::Aio& a) {
  AioOptions o;
  o.block_size = static_cast<std::uint64_t>(a.block_size);
  o.queue_depth = static_cast<int>(a.queue_depth);
  o.thread_count = static_cast<int>(a.thread_count);
  o.single_submit = a.single_submit;
  o.overlap_events = a.overlap_events;
  return o;
}

void check_io_uring_available() {
  io_uring ring;
  const int rc = io_uring_queue_init(2, &ring, 0);
  if (rc < 0)
    user_fail("offload",
              "io_uring is not available here (io_uring_queue_init: {}): the NVMe tier needs Linux "
              ">= 5.6 with io_uring allowed (containers may block it with seccomp, and "
              "/proc/sys/kernel/io_uring_disabled must be 0); use offload device \"cpu\" instead",
              std::strerror(-rc));
  io_uring_queue_exit(&ring);
}

struct AioQueue::Worker {
  io_uring ring{};
  std::thread thread;
  bool ring_ready = false;  // io_uring_queue_init succeeded
  int inflight = 0;
  std::string broken;  // a ring failure: every later request fails with this
};

AioQueue::AioQueue(const AioOptions& opts) : opts_(opts) {
  if (opts.block_size == 0 || opts.block_size % 4096 != 0 || opts.block_size > (1u << 30))
    user_fail("offload", "aio.block_size {} must be a positive multiple of 4096 and at most 1 GiB",
              opts.block_size);
  if (opts.queue_depth < 1 || opts.queue_depth > 4096)
    user_fail("offload", "aio.queue_depth {} must be in [1, 4096]", opts.queue_depth);
  if (opts.thread_count < 1 || opts.thread_count > 64)
    user_fail("offload", "aio.thread_count {} must be in [1, 64]", opts.thread_count);
  // A constructor that throws runs no destructor: stop what was started before rethrowing.
  try {
    for (int i = 0; i < opts.thread_count; ++i) {
      auto w = std::make_unique<Worker>();
      const int rc = io_uring_queue_init(static_cast<unsigned>(opts.queue_depth), &w->ring, 0);
      if (rc < 0) {
        check_io_uring_available();  // throws the explained error when io_uring is blocked
        fail("offload", "io_uring_queue_init({}) failed: {}", opts.queue_depth, std::strerror(-rc));
      }
      Worker* raw = w.get();
      workers_.push_back(std::move(w));
      raw->ring_ready = true;
      raw->thread = std::thread([this, raw] { run(*raw); });  // may throw (thread limit)
    }
  } catch (...) {
    shut_down();
    throw;
  }
}

void AioQueue::shut_down() noexcept {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  // Each worker returns only once nothing it submitted is in the kernel any more.
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
    if (w->ring_ready) io_uring_queue_exit(&w->ring);
    w->ring_ready = false;
  }
  workers_.clear();
}

AioQueue::~AioQueue() { shut_down(); }

AioQueue::Ticket AioQueue::submit(IoOp op, int fd, const std::string& path, void* buf,
                                  std::uint64_t bytes, std::uint64_t offset,
                                  std::initializer_list<Ticket> after) {
  std::lock_guard lk(mu_);
  STRATA_CHECK(!stop_, "offload", "I/O submitted to a queue that is shutting down");
  auto job = std::make_unique<Job>();
  Job& j = *job;
  j.id = next_++;
  j.op = op;
  j.fd = fd;
  j.path = path;
  j.buf = static_cast<char*>(buf);
  j.bytes = bytes;
  j.offset = offset;
  for (std::uint64_t pos = 0; pos < bytes; pos += opts_.block_size)
    j.requests.push_back(Request{&j, pos, std::min<std::uint64_t>(opts_.block_size, bytes - pos)});
  j.remaining = j.requests.size();
  jobs_.emplace(j.id, std::move(job));
  const Ticket id = j.id;
  for (Ticket a : after) {
    if (a == 0 || a == id) continue;
    if (jobs_.count(a)) {
      waiting_.emplace(a, &j);
      ++j.deps;
    } else if (auto f = failed_.find(a); f != failed_.end() && j.error.empty()) {
      j.error = f->second;  // a job it waits for failed: so does this one
    }
  }
  if (j.deps == 0) dependency_done_locked(j, {});
  return id;
}

void AioQueue::dependency_done_locked(Job& j, const std::string& error) {
  if (!error.empty() && j.error.empty()) j.error = error;
  if (j.deps > 0 && --j.deps > 0) return;
  if (!j.error.empty()) finish_job_locked(j);
  else enqueue_locked(j);
}

void AioQueue::enqueue_locked(Job& j) {
  if (j.requests.empty()) {
    finish_job_locked(j);
    return;
  }
  for (auto& r : j.requests) ready_.push_back(&r);
  work_cv_.notify_all();
}

void AioQueue::finish_request_locked(Request& r, const std::string& error) {
  Job& j = *r.job;
  if (!error.empty() && j.error.empty()) j.error = error;
  if (--j.remaining == 0) finish_job_locked(j);
}

void AioQueue::finish_job_locked(Job& j) {
  const Ticket id = j.id;
  const std::string error = j.error;
  if (!error.empty()) failed_.emplace(id, error);
  std::vector<Job*> dependents;
  auto [lo, hi] = waiting_.equal_range(id);
  for (auto it = lo; it != hi; ++it) dependents.push_back(it->second);
  waiting_.erase(lo, hi);
  jobs_.erase(id);  // destroys j
  for (Job* d : dependents) dependency_done_locked(*d, error);
  done_cv_.notify_all();
}

void AioQueue::wait(Ticket t) {
  if (t == 0) return;
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [&] { return jobs_.count(t) == 0; });
  if (auto f = failed_.find(t); f != failed_.end()) throw Error("offload", f->second);
}

bool AioQueue::done(Ticket t) const {
  std::lock_guard lk(mu_);
  return jobs_.count(t) == 0;
}

void AioQueue::wait_all() {
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [&] { return jobs_.empty(); });
  if (!failed_.empty()) throw Error("offload", failed_.begin()->second);
}

void AioQueue::run(Worker& w) {
  std::vector<Request*> batch;
  const auto qd = opts_.queue_depth;
  for (;;) {
    batch.clear();
    {
      std::unique_lock lk(mu_);
      if (w.inflight == 0) work_cv_.wait(lk, [&] { return stop_ || !ready_.empty(); });
      if (stop_ && w.inflight == 0) return;
      if (!stop_) {
        int room = qd - w.inflight;
        if (!opts_.overlap_events && w.inflight > 0) room = 0;
        while (room-- > 0 && !ready_.empty()) {
          batch.push_back(ready_.front());
          ready_.pop_front();
        }
      }
    }
    // Requests prepared since the last successful io_uring_submit: if the ring refuses them
    // they will never complete, so they fail here.
    std::vector<Request*> unsubmitted;
    auto submit_ring = [&] {
      if (unsubmitted.empty()) return;
      int rc;
      do rc = io_uring_submit(&w.ring);
      while (rc == -EINTR || rc == -EAGAIN);
      if (rc < 0) {
        w.broken = fmt::format("io_uring_submit failed: {}", std::strerror(-rc));
        std::lock_guard lk(mu_);
        for (Request* r : unsubmitted) {
          --w.inflight;
          finish_request_locked(*r, w.broken);
        }
      }
      unsubmitted.clear();
    };
    for (Request* r : batch) {
      const Job& j = *r->job;
      const std::uint64_t off = j.offset + r->pos;
      std::string error;
      if (!w.broken.empty()) error = w.broken;
      else if (opts_.fault)
        if (const int e = opts_.fault(IoRequestInfo{j.op, j.path, off, r->bytes}); e != 0)
          error = describe_errno(j.op, j.path, off, r->bytes, e);
      io_uring_sqe* sqe = error.empty() ? io_uring_get_sqe(&w.ring) : nullptr;
      if (error.empty() && !sqe) error = "io_uring submission queue is full";
      if (!error.empty()) {
        std::lock_guard lk(mu_);
        finish_request_locked(*r, error);
        continue;
      }
      const auto n = static_cast<unsigned>(r->bytes);
      if (j.op == IoOp::read) io_uring_prep_read(sqe, j.fd, j.buf + r->pos, n, off);
      else io_uring_prep_write(sqe, j.fd, j.buf + r->pos, n, off);
      io_uring_sqe_set_data(sqe, r);
      ++w.inflight;
      unsubmitted.push_back(r);
      if (opts_.single_submit) submit_ring();
    }
    submit_ring();
    if (w.inflight == 0) continue;
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&w.ring, &cqe);
    if (rc == -EINTR || rc == -EAGAIN) continue;
    if (rc < 0) {
      w.broken = fmt::format("io_uring_wait_cqe failed: {}", std::strerror(-rc));
      continue;  // in-flight requests still complete; later ones fail
    }
    std::unique_lock lk(mu_);
    do {
      auto* r = static_cast<Request*>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&w.ring, cqe);
      --w.inflight;
      const Job& j = *r->job;
      const std::uint64_t off = j.offset + r->pos;
      if (res < 0) {
        finish_request_locked(*r, describe_errno(j.op, j.path, off, r->bytes, -res));
      } else if (res == 0) {
        finish_request_locked(
            *r, fmt::format("{} of {} at offset {} of {} transferred nothing ({})", op_name(j.op),
                            format_bytes(r->bytes), off, j.path,
                            j.op == IoOp::read ? "the file is shorter than expected"
                                               : "the drive accepted no data"));
      } else if (static_cast<std::uint64_t>(res) < r->bytes) {
        r->pos += static_cast<std::uint64_t>(res);  // short transfer: queue the rest first
        r->bytes -= static_cast<std::uint64_t>(res);
        ready_.push_front(r);
      } else {
        finish_request_locked(*r, {});
      }
    } while (io_uring_peek_cqe(&w.ring, &cqe) == 0);
  }
}

}  // namespace strata::offload
