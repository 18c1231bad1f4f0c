// The local transport: the 1-rank world of a program run without a launcher. Collectives are
// copies (a sum over one rank is the input), send/recv to self match by tag in posting order.
#include <cstring>
#include <deque>
#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/error.hpp"
#include "parallel/comm/transports.hpp"

namespace strata::parallel {

namespace {

// GPU buffers: queued on the device's current stream, after the kernels that wrote the source
// and before those that read the destination (the calling thread's stream: the one its work is
// ordered on), so the host need not wait.
void copy(void* dst, const void* src, std::size_t bytes, Device dev) {
  if (bytes == 0 || dst == src) return;
  if (dev.is_cuda())
    cuda::memcpy_async(dst, src, bytes, cuda::CopyKind::device_to_device,
                       current_stream(dev).handle());
  else
    std::memmove(dst, src, bytes);
}

class LocalComm final : public CommImpl {
 public:
  explicit LocalComm(std::shared_ptr<SeqTracker> t) : tracker_(std::move(t)) {}

  std::string_view transport() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::shared_ptr<CommImpl> split(int, int, std::shared_ptr<SeqTracker> t) override {
    return std::make_shared<LocalComm>(std::move(t));
  }
  // One rank: sum, avg and max of one value are the value.
  void all_reduce(const Call& c) override { copy_and_complete(c); }
  void reduce_scatter(const Call& c) override { copy_and_complete(c); }
  void all_gather(const Call& c) override { copy_and_complete(c); }
  void broadcast(const Call& c) override { c.work->complete(); }
  void barrier(const Call& c) override { c.work->complete(); }

  void send(const Call& c) override {
    std::lock_guard lk(mu_);
    for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
      if (it->work->op().tag != c.work->op().tag) continue;
      deliver(c, *it);
      recvs_.erase(it);
      return;
    }
    sends_.push_back(c);
  }
  void recv(const Call& c) override {
    std::lock_guard lk(mu_);
    for (auto it = sends_.begin(); it != sends_.end(); ++it) {
      if (it->work->op().tag != c.work->op().tag) continue;
      deliver(*it, c);
      sends_.erase(it);
      return;
    }
    recvs_.push_back(c);
  }

  std::string explain_stall(const OpDesc& op, const GroupInfo&,
                            std::chrono::milliseconds) override {
    if (op.kind == OpKind::recv) return "no send to this rank with that tag was posted";
    if (op.kind == OpKind::send) return "no receive from this rank with that tag was posted";
    return {};
  }

 private:
  static void copy_and_complete(const Call& c) {
    try {
      copy(c.out.data, c.in.data, c.in.nbytes() < c.out.nbytes() ? c.in.nbytes() : c.out.nbytes(),
           c.out.device);
      c.work->complete();
    } catch (...) {
      c.work->fail(std::current_exception());
    }
  }
  static void deliver(const Call& s, const Call& r) {
    if (s.in.nbytes() != r.out.nbytes()) {
      const std::string why =
          fmt::format("send of {} × {} met a receive of {} × {}", dtype_name(s.in.dtype),
                      s.in.count, dtype_name(r.out.dtype), r.out.count);
      s.work->fail(why);
      r.work->fail(why);
      return;
    }
    copy(r.out.data, s.in.data, s.in.nbytes(), r.out.device);
    s.work->complete();
    r.work->complete();
  }

  std::shared_ptr<SeqTracker> tracker_;
  std::mutex mu_;
  std::deque<Call> sends_, recvs_;
};

}  // namespace

namespace local {
bool is_available() {
  return true;
}
std::shared_ptr<CommImpl> init(std::shared_ptr<SeqTracker> tracker) {
  return std::make_shared<LocalComm>(std::move(tracker));
}
}  // namespace local

}  // namespace strata::parallel
