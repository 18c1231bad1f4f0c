// The NCCL transport (device buffers): one NCCL communicator per group on this rank's GPU, its
// id bootstrapped over the host transport; calls run on a stream of their own, ordered after the
// work the posting thread's current stream has queued, and complete when their event does (the
// Work's device event: consumers wait for it on their stream). Group uses it when every rank of
// the group has a GPU of its own (transports.hpp; otherwise the staged transport).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/error.hpp"
#include "framework/core/tensor.hpp"
#include "parallel/comm/transports.hpp"
#include "parallel/comm/overlap.hpp"

#define STRATA_CHECK_NCCL(call)                                                                \
  do {                                                                                         \
    const ncclResult_t r_ = (call);                                                            \
    if (r_ != ncclSuccess)                                                                     \
      ::strata::fail("comm", "{} failed: {} ({}:{})", #call, ncclGetErrorString(r_), __FILE__, \
                     __LINE__);                                                                \
  } while (0)

#define STRATA_CHECK_CUDA(call)                                                                \
  do {                                                                                         \
    const cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess)                                                                     \
      ::strata::fail("cuda", "{} failed: {} ({}:{})", #call, cudaGetErrorString(e_), __FILE__, \
                     __LINE__);                                                                \
  } while (0)

namespace strata::parallel {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f64:
      return ncclFloat64;
    case DType::i8:
      return ncclInt8;
    case DType::u8:
      return ncclUint8;
    case DType::i32:
      return ncclInt32;
    case DType::u32:
      return ncclUint32;
    case DType::i64:
      return ncclInt64;
    case DType::i16:
    case DType::u16:
      break;
  }
  user_fail("comm",
            "NCCL has no {} type: communicate device buffers of 16-bit integers as "
            "i32, or move them to the CPU",
            dtype_name(t));
}

// NCCL's avg is sum then division by the rank count (truncating for integers), as in MPI's path.
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
  }
  return ncclSum;
}


// Ordering. A call waits, on NCCL's own stream, for what the posting thread's current stream of
// the GPU (current_stream(Device::cuda(i)): where the kernels that produced the input run) has
// queued so far — an event recorded there and waited for on the device, so the host never blocks
// to post. The call's completion is an event recorded after it on NCCL's stream: the Work's
// device event, which a consumer stream waits for with Work::wait_on (no host blocking), and
// which Work::wait() polls on the host (cudaEventQuery, and NCCL's asynchronous errors).
// Events are not created per call: one "ready" event is re-recorded for every call (a stream
// waits for the record made before the wait), and the "done" events come from a pool, each
// going back when its call is found complete (the oldest calls are checked at each new call;
// NCCL's stream runs them in order). The pool also keeps each call's state — and so its buffers
// (Work::keep_alive) — until the GPU has finished it, whether or not anyone waits for its Work.
//
// Tags. NCCL's send/recv have none: NCCL pairs the n-th send from rank A to rank B with the n-th
// receive posted on B from A. A tag is therefore accepted and ignored, under one rule for the
// caller: between any two ranks, in each direction, the receives must be posted in the order of
// the sends, which is then the pairing that MPI's tag matching would make too. PipelineExecutor
// keeps it (activations to the next stage and gradients to the previous one are each sent and
// received in micro-batch order, the evaluation forward's transfer alone in its own call);
// tests/dist/pipeline's PipelineTagsIgnored runs the executor over MPI with every tag replaced by
// 0 (matching by posting order, as NCCL does) and gets the tagged run's losses bit for bit.
// (One NCCL stream per communicator also runs a receive posted ahead before anything posted after
// it, so the executor's receive-ahead would stall there: pipelines on GPUs are refused for now.)
class NcclComm final : public CommImpl, public std::enable_shared_from_this<NcclComm> {
 public:
  NcclComm(ncclComm_t comm, int device, std::shared_ptr<SeqTracker> tracker)
      : comm_(comm), device_(device), tracker_(std::move(tracker)) {
    STRATA_CHECK_NCCL(ncclCommUserRank(comm_, &rank_));
    STRATA_CHECK_NCCL(ncclCommCount(comm_, &size_));
    stream_ = Stream::create(Device::cuda(device_));  // non-blocking: never the legacy stream
  }
  ~NcclComm() override {
    // Calls still queued (their Works dropped unwaited, or a peer is gone): give them a few
    // seconds, then abort rather than hang here. (Works do not keep the communicator alive.)
    cudaSetDevice(device_);
    const auto s = static_cast<cudaStream_t>(stream_.handle());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    cudaError_t q = cudaStreamQuery(s);
    while (q == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      q = cudaStreamQuery(s);
    }
    if (q == cudaSuccess) {
      ncclCommDestroy(comm_);
    } else {
      cudaGetLastError();  // (not sticky: cleared so that later calls do not report it)
      ncclCommAbort(comm_);
    }
    // stream_ is destroyed after this body (cudaStreamDestroy lets queued work finish).
  }

  std::string_view transport() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::shared_ptr<CommImpl> split(int color, int key, std::shared_ptr<SeqTracker> t) override {
    ncclComm_t child = nullptr;
    STRATA_CHECK_NCCL(ncclCommSplit(comm_, color, key, &child, nullptr));
    return std::make_shared<NcclComm>(child, device_, std::move(t));
  }

  void all_reduce(const Call& c) override {
    const OpDesc op = c.work->op();
    enqueue(c, [&](cudaStream_t s) {
      return ncclAllReduce(c.in.data, c.out.data, op.count, nccl_type(op.dtype), nccl_op(op.reduce),
                           comm_, s);
    });
  }
  void reduce_scatter(const Call& c) override {
    const OpDesc op = c.work->op();
    const bool in_place = c.out.data == static_cast<const char*>(c.in.data) +
                                            c.out.nbytes() * static_cast<std::size_t>(rank_);
    STRATA_CHECK(in_place || !overlaps(c.in.data, c.in.nbytes(), c.out.data, c.out.nbytes()),
                 "comm",
                 "{}: on device buffers the output must be this rank's block of the "
                 "input or not overlap it",
                 op.str());
    enqueue(c, [&](cudaStream_t s) {
      return ncclReduceScatter(c.in.data, c.out.data, op.count, nccl_type(op.dtype),
                               nccl_op(op.reduce), comm_, s);
    });
  }
  void all_gather(const Call& c) override {
    const OpDesc op = c.work->op();
    const bool in_place = c.in.data == static_cast<const char*>(c.out.data) +
                                           c.in.nbytes() * static_cast<std::size_t>(rank_);
    STRATA_CHECK(in_place || !overlaps(c.in.data, c.in.nbytes(), c.out.data, c.out.nbytes()),
                 "comm",
                 "{}: on device buffers the input must be this rank's block of the "
                 "output or not overlap it",
                 op.str());
    enqueue(c, [&](cudaStream_t s) {
      return ncclAllGather(c.in.data, c.out.data, op.count, nccl_type(op.dtype), comm_, s);
    });
  }
  void broadcast(const Call& c) override {
    const OpDesc op = c.work->op();
    enqueue(c, [&](cudaStream_t s) {
      return ncclBroadcast(c.out.data, c.out.data, op.count, nccl_type(op.dtype), op.peer, comm_, s);
    });
  }
  void send(const Call& c) override {
    const OpDesc op = c.work->op();  // op.tag is ignored: see "Tags" above
    enqueue(c, [&](cudaStream_t s) {
      return ncclSend(c.in.data, op.count, nccl_type(op.dtype), op.peer, comm_, s);
    });
  }
  void recv(const Call& c) override {
    const OpDesc op = c.work->op();  // op.tag is ignored: see "Tags" above
    enqueue(c, [&](cudaStream_t s) {
      return ncclRecv(c.out.data, op.count, nccl_type(op.dtype), op.peer, comm_, s);
    });
  }
  void barrier(const Call& c) override {
    {
      std::lock_guard lk(mu_);
      if (!scratch_)
        scratch_ = Tensor::zeros(Shape{1}, DType::i32,
                                 TensorOptions{Device::cuda(device_), Tier::device, Category::comm})
                       .storage();
    }
    enqueue(c, [&](cudaStream_t s) {
      return ncclAllReduce(scratch_->data(), scratch_->data(), 1, ncclInt32, ncclSum, comm_, s);
    });
  }
  std::string explain_stall(const OpDesc&, const GroupInfo&, std::chrono::milliseconds) override {
    return {};  // Group asks the host transport, which shares this group's sequence numbers
  }

 private:
  struct Posted {
    std::shared_ptr<WorkState> work;  // (keeps the call's buffers until the GPU is done)
    Event done;
  };

  // Gives the done events of the oldest calls that have completed back to the pool.
  void reap_locked() {
    while (!posted_.empty() && posted_.front().work->is_completed()) {
      free_events_.push_back(std::move(posted_.front().done));
      posted_.pop_front();
    }
  }

  template <typename F>
  void enqueue(const Call& c, F&& call) {
    // The producers' stream: the posting thread's current stream of this GPU.
    const Stream producer = current_stream(Device::cuda(device_));
    std::lock_guard lk(mu_);
    reap_locked();
    STRATA_CHECK_CUDA(cudaSetDevice(device_));
    ready_.record(producer);
    ready_.wait(stream_);  // on the device: the host does not block
    const ncclResult_t r = call(static_cast<cudaStream_t>(stream_.handle()));
    if (r != ncclSuccess)
      fail("comm", "{} on {} failed in NCCL: {}", c.work->op().str(), c.work->group(),
           ncclGetErrorString(r));
    Event done;
    if (!free_events_.empty()) {
      done = std::move(free_events_.back());
      free_events_.pop_back();
    }
    done.record(stream_);  // (created on first use, then re-recorded)
    c.work->set_device_event(done);
    // The poll runs only until the Work is complete; its event goes back to the pool after that
    // (reap_locked), so a re-recorded event is never polled for an earlier call.
    std::weak_ptr<NcclComm> weak = weak_from_this();
    c.work->set_poll([done, weak]() -> bool {
      if (done.query()) return true;  // throws strata::Error on a CUDA error
      if (const auto self = weak.lock()) {
        ncclResult_t async = ncclSuccess;
        STRATA_CHECK_NCCL(ncclCommGetAsyncError(self->comm_, &async));
        if (async != ncclSuccess && async != ncclInProgress)
          fail("comm", "NCCL reported an asynchronous error: {}", ncclGetErrorString(async));
      }
      return false;
    });
    posted_.push_back(Posted{c.work, std::move(done)});
  }

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0, size_ = 1;
  Stream stream_;  // NCCL's stream
  std::shared_ptr<SeqTracker> tracker_;
  std::mutex mu_;
  Event ready_;                     // re-recorded on the producers' stream for every call
  std::vector<Event> free_events_;  // done events of completed calls, for reuse
  std::deque<Posted> posted_;       // calls not yet found complete, oldest first
  std::shared_ptr<Storage> scratch_;
};

}  // namespace

namespace nccl {

bool is_available() {
  return cuda::device_count() > 0;
}

std::string unavailable_reason() {
  if (is_available()) return {};
  return fmt::format("no GPU is visible to this process (CUDA: {})", cuda::describe_devices());
}

std::shared_ptr<CommImpl> init(int rank, int size, int device,
                               const std::function<void(void*, std::size_t)>& bcast_id,
                               std::shared_ptr<SeqTracker> tracker) {
  ncclUniqueId id{};
  if (rank == 0) STRATA_CHECK_NCCL(ncclGetUniqueId(&id));
  bcast_id(&id, sizeof(id));
  STRATA_CHECK_CUDA(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  STRATA_CHECK_NCCL(ncclCommInitRank(&comm, size, id, rank));
  return std::make_shared<NcclComm>(comm, device, std::move(tracker));
}

}  // namespace nccl

}  // namespace strata::parallel
