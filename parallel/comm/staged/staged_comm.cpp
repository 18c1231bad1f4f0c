// The host-staged device transport (transports.hpp, staged::init): a CommImpl that wraps the
// group's host transport. Each call on device buffers
//   1. copies its input into a staging buffer in pinned host memory, queued on the caller's
//      current stream of the GPU and waited for (so every kernel that wrote the input has run; a
//      call without an input still waits for that stream, so that the output's memory is no
//      longer used by anything queued before the call);
//   2. runs the host transport's call on the staging buffers (MPI: tags, validation, stall
//      explanations and progress are its own);
//   3. when the host call has completed, copies the result into the device buffer on a stream of
//      its own and waits for that copy, and only then completes the Work: wait() returns after the
//      data is on the device, and since the Work has no device event, Work::wait_on waits the
//      same way. Kernels queued after either read the result.
// Step 3 runs on the thread that finds the Work complete (a waiter, through WorkState's poll).
// It is what Group uses when the ranks of a group do not each have a GPU of their own (NCCL
// refuses two ranks on one GPU) or NCCL is missing: slower than NCCL (two copies and a
// synchronisation per call), meant for tests and small machines.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "framework/backend/stream.hpp"
#include "framework/core/error.hpp"
#include "framework/core/tensor.hpp"
#include "parallel/comm/device_support.hpp"
#include "parallel/comm/transports.hpp"

namespace strata::parallel {

namespace staged_detail {

constexpr std::size_t kRegionAlign = 256;  // the output region starts on this boundary
constexpr std::size_t kKeepFree = 16;      // staging buffers kept for reuse, at most

std::size_t align_up(std::size_t n, std::size_t a) {
  return (n + a - 1) / a * a;
}

// A size that later calls of about the same size can reuse: 4 KiB granules, coarser for large
// buffers (at most 1/8 wasted).
std::size_t rounded_size(std::size_t bytes) {
  std::size_t granule = 4096;
  while (granule * 8 < bytes) granule *= 2;
  return align_up(std::max<std::size_t>(bytes, 1), granule);
}

// Staging buffers, kept for reuse (pinning host memory is slow): a call takes the smallest free
// one that fits, or allocates one (host tier, category comm, on the global ledger).
class StagingPool {
 public:
  explicit StagingPool(bool pinned) : pinned_(pinned) {}

  std::shared_ptr<Storage> take(std::size_t bytes) {
    {
      std::lock_guard lk(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if ((*it)->bytes() >= bytes && (best == free_.end() || (*it)->bytes() < (*best)->bytes()))
          best = it;
      if (best != free_.end()) {
        std::shared_ptr<Storage> s = std::move(*best);
        free_.erase(best);
        return s;
      }
    }
    const Tensor t = Tensor::empty(Shape{static_cast<std::int64_t>(rounded_size(bytes))}, DType::u8,
                                   TensorOptions{Device::cpu(), Tier::host, Category::comm, nullptr,
                                                 pinned_});
    return t.storage();
  }

  void give_back(std::shared_ptr<Storage> s) {
    std::lock_guard lk(mu_);
    free_.push_back(std::move(s));
    if (free_.size() > kKeepFree) {
      auto smallest = std::min_element(free_.begin(), free_.end(), [](const auto& a, const auto& b) {
        return a->bytes() < b->bytes();
      });
      free_.erase(smallest);
    }
  }

 private:
  bool pinned_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Storage>> free_;
};

// Where one call's data sits in its staging buffer, and what is copied in and out.
struct Layout {
  std::size_t in_bytes = 0;   // the input region, at offset 0
  std::size_t out_bytes = 0;  // the output region
  bool in_place = false;      // the output region is the input region
  bool copy_in = false;       // c.in -> input region before the host call
  bool copy_out = false;      // output region -> c.out when the host call completed
  std::size_t out_offset() const { return in_place ? 0 : align_up(in_bytes, kRegionAlign); }
  std::size_t total() const {
    return in_place ? std::max(in_bytes, out_bytes) : out_offset() + out_bytes;
  }
};

// One call in flight: the host call's state, the staging buffer and the copy back.
struct InFlight {
  std::mutex mu;
  std::shared_ptr<WorkState> inner;
  std::shared_ptr<Storage> buf;
  void* dst = nullptr;  // c.out (device memory, or host memory under the test hook)
  std::size_t offset = 0, bytes = 0;
  bool finished = false;
};

class StagedComm final : public CommImpl, public std::enable_shared_from_this<StagedComm> {
 public:
  // device >= 0: device buffers of that GPU; -1: CPU buffers (the test hook).
  StagedComm(std::shared_ptr<CommImpl> host, int device)
      : host_(std::move(host)), device_(device), pool_(std::make_shared<StagingPool>(device >= 0)) {
    STRATA_CHECK(host_ != nullptr, "comm", "the staged transport needs a host transport");
    if (device_ >= 0) copy_stream_ = Stream::create(Device::cuda(device_));
  }

  std::string_view transport() const override { return "staged"; }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  std::shared_ptr<CommImpl> split(int color, int key, std::shared_ptr<SeqTracker> t) override {
    return std::make_shared<StagedComm>(host_->split(color, key, std::move(t)), device_);
  }

  void all_reduce(const Call& c) override {
    // One region, reduced in place by the host transport (MPI_IN_PLACE).
    Layout l;
    l.in_bytes = c.in.nbytes();
    l.out_bytes = c.out.nbytes();
    l.in_place = l.copy_in = l.copy_out = true;
    run(c, l, &CommImpl::all_reduce);
  }
  void reduce_scatter(const Call& c) override {
    Layout l;
    l.in_bytes = c.in.nbytes();
    l.out_bytes = c.out.nbytes();
    l.copy_in = l.copy_out = true;
    run(c, l, &CommImpl::reduce_scatter);
  }
  void all_gather(const Call& c) override {
    Layout l;
    l.in_bytes = c.in.nbytes();
    l.out_bytes = c.out.nbytes();
    l.copy_in = l.copy_out = true;
    run(c, l, &CommImpl::all_gather);
  }
  void broadcast(const Call& c) override {
    // The root sends its buffer; the others receive into theirs.
    const bool root = c.work->op().peer == rank();
    Layout l;
    l.in_bytes = l.out_bytes = c.out.nbytes();
    l.in_place = true;
    l.copy_in = root;
    l.copy_out = !root;
    run(c, l, &CommImpl::broadcast);
  }
  void send(const Call& c) override {
    Layout l;
    l.in_bytes = c.in.nbytes();
    l.copy_in = true;
    run(c, l, &CommImpl::send);
  }
  void recv(const Call& c) override {
    Layout l;
    l.in_bytes = l.out_bytes = c.out.nbytes();
    l.in_place = true;
    l.copy_out = true;
    run(c, l, &CommImpl::recv);
  }
  void barrier(const Call& c) override { host_->barrier(c); }  // no buffers

  std::string explain_stall(const OpDesc& op, const GroupInfo& info,
                            std::chrono::milliseconds budget) override {
    return host_->explain_stall(op, info, budget);
  }

 private:
  // Host memory `bytes` long at `dst` <- `src` (device memory, or host memory under the test hook).
  void copy_in(void* dst, const void* src, std::size_t bytes) const {
    if (bytes == 0) return;
    if (device_ < 0) {
      std::memcpy(dst, src, bytes);
      return;
    }
    // On the caller's stream: after the kernels that wrote the input; the host waits for it.
    device_support::copy_and_wait(dst, src, bytes, /*to_device=*/false, device_,
                                  current_stream(Device::cuda(device_)).handle());
  }
  void copy_out(void* dst, const void* src, std::size_t bytes) const {
    if (bytes == 0) return;
    if (device_ < 0) {
      std::memcpy(dst, src, bytes);
      return;
    }
    device_support::copy_and_wait(dst, src, bytes, /*to_device=*/true, device_,
                                  copy_stream_.handle());
  }

  void run(const Call& c, const Layout& l, void (CommImpl::*fn)(const Call&)) {
    const OpDesc op = c.work->op();
    auto f = std::make_shared<InFlight>();
    f->buf = pool_->take(l.total());
    auto* base = static_cast<char*>(f->buf->data());
    char* out_region = base + l.out_offset();
    if (l.copy_in) {
      copy_in(base, c.in.data, l.in_bytes);
    } else if (device_ >= 0) {
      // Nothing to read, but the output must not be written before what the caller's stream
      // queued before this call has run (its memory may have been in use until then).
      current_stream(Device::cuda(device_)).synchronize();
    }
    if (l.copy_out) {
      f->dst = c.out.data;
      f->offset = l.out_offset();
      f->bytes = l.out_bytes;
    }
    // The host call, on the staging buffer, numbered as the caller's.
    f->inner = std::make_shared<WorkState>(op, c.work->group(), c.work->timeout());
    f->inner->keep_alive(f->buf);  // while the host call may use it, even if this side lets go
    const ConstSpan hin(base, c.in.count, c.in.dtype, Device::cpu(), Tier::host);
    const Span hout{out_region, c.out.count, c.out.dtype, Device::cpu(), Tier::host};
    c.work->set_poll([self = shared_from_this(), f]() { return self->finish(*f); });
    (host_.get()->*fn)(Call{f->inner, hin, hout, c.validate});
  }

  // The poll of the caller's Work: true once the host call completed and its result is in the
  // device buffer; throws the host call's failure (or the copy's).
  bool finish(InFlight& f) {
    std::lock_guard lk(f.mu);
    if (f.finished) return true;
    if (!f.inner->is_completed()) return false;
    f.finished = true;
    // Taken out first: a failed host call may still use the buffer (its state keeps it), so
    // it never goes back to the pool then.
    std::shared_ptr<Storage> buf = std::move(f.buf);
    f.inner->wait(std::chrono::milliseconds(0));  // completed: rethrows its failure, if any
    if (f.dst) copy_out(f.dst, static_cast<const char*>(buf->data()) + f.offset, f.bytes);
    pool_->give_back(std::move(buf));
    return true;
  }

  std::shared_ptr<CommImpl> host_;
  int device_;
  Stream copy_stream_;  // the copies back to the device (device_ >= 0)
  std::shared_ptr<StagingPool> pool_;
};

}  // namespace staged_detail

namespace staged {

std::shared_ptr<CommImpl> init(std::shared_ptr<CommImpl> host, int device) {
  STRATA_CHECK(device >= 0, "comm", "the staged transport needs a GPU index, got {}", device);
  return std::make_shared<staged_detail::StagedComm>(std::move(host), device);
}

std::shared_ptr<CommImpl> init_for_cpu_buffers(std::shared_ptr<CommImpl> host) {
  return std::make_shared<staged_detail::StagedComm>(std::move(host), -1);
}

}  // namespace staged

}  // namespace strata::parallel
