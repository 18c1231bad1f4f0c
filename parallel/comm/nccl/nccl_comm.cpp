// The NCCL transport (device buffers): one NCCL communicator per group on this rank's GPU, its
// id bootstrapped over the host transport; calls run on a dedicated stream, ordered after the
// work already issued on the default stream, and complete when their cudaEvent does.
#include <cuda_runtime.h>
#include <nccl.h>

#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
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


class NcclComm final : public CommImpl, public std::enable_shared_from_this<NcclComm> {
 public:
  NcclComm(ncclComm_t comm, int device, std::shared_ptr<SeqTracker> tracker)
      : comm_(comm), device_(device), tracker_(std::move(tracker)) {
    STRATA_CHECK_NCCL(ncclCommUserRank(comm_, &rank_));
    STRATA_CHECK_NCCL(ncclCommCount(comm_, &size_));
    STRATA_CHECK_CUDA(cudaSetDevice(device_));
    STRATA_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclComm() override {
    cudaSetDevice(device_);
    if (cudaStreamQuery(stream_) == cudaSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);  // a call never completed (a peer is gone): do not hang here
    cudaStreamDestroy(stream_);
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
    enqueue(c, [&] {
      return ncclAllReduce(c.in.data, c.out.data, op.count, nccl_type(op.dtype), nccl_op(op.reduce),
                           comm_, stream_);
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
    enqueue(c, [&] {
      return ncclReduceScatter(c.in.data, c.out.data, op.count, nccl_type(op.dtype),
                               nccl_op(op.reduce), comm_, stream_);
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
    enqueue(c, [&] {
      return ncclAllGather(c.in.data, c.out.data, op.count, nccl_type(op.dtype), comm_, stream_);
    });
  }
  void broadcast(const Call& c) override {
    const OpDesc op = c.work->op();
    enqueue(c, [&] {
      return ncclBroadcast(c.out.data, c.out.data, op.count, nccl_type(op.dtype), op.peer, comm_,
                           stream_);
    });
  }
  void send(const Call& c) override {
    const OpDesc op = c.work->op();
    check_tag(op);
    enqueue(c, [&] {
      return ncclSend(c.in.data, op.count, nccl_type(op.dtype), op.peer, comm_, stream_);
    });
  }
  void recv(const Call& c) override {
    const OpDesc op = c.work->op();
    check_tag(op);
    enqueue(c, [&] {
      return ncclRecv(c.out.data, op.count, nccl_type(op.dtype), op.peer, comm_, stream_);
    });
  }
  void barrier(const Call& c) override {
    {
      std::lock_guard lk(mu_);
      if (!scratch_)
        scratch_ = Tensor::empty(Shape{1}, DType::i32,
                                 TensorOptions{Device::cuda(device_), Tier::device, Category::comm})
                       .storage();
    }
    enqueue(c, [&] {
      return ncclAllReduce(scratch_->data(), scratch_->data(), 1, ncclInt32, ncclSum, comm_,
                           stream_);
    });
  }
  std::string explain_stall(const OpDesc&, const GroupInfo&, std::chrono::milliseconds) override {
    return {};  // Group asks the host transport, which shares this group's sequence numbers
  }

 private:
  static void check_tag(const OpDesc& op) {
    if (op.tag != 0)
      user_fail("comm",
                "{}: NCCL send/recv have no tags; use tag 0 and post them in matching "
                "order",
                op.str());
  }

  template <typename F>
  void enqueue(const Call& c, F&& call) {
    std::lock_guard lk(mu_);
    STRATA_CHECK_CUDA(cudaSetDevice(device_));
    // Run after everything already issued on the legacy default stream (the producers).
    cudaEvent_t ready = nullptr, done = nullptr;
    STRATA_CHECK_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    STRATA_CHECK_CUDA(cudaEventRecord(ready, cudaStreamLegacy));
    STRATA_CHECK_CUDA(cudaStreamWaitEvent(stream_, ready, 0));
    cudaEventDestroy(ready);
    const ncclResult_t r = call();
    if (r != ncclSuccess)
      fail("comm", "{} on {} failed in NCCL: {}", c.work->op().str(), c.work->group(),
           ncclGetErrorString(r));
    STRATA_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    STRATA_CHECK_CUDA(cudaEventRecord(done, stream_));
    std::shared_ptr<CUevent_st> ev(done, [](cudaEvent_t e) { cudaEventDestroy(e); });
    c.work->keep_alive(shared_from_this());
    c.work->set_poll([ev, comm = comm_]() -> bool {
      const cudaError_t e = cudaEventQuery(ev.get());
      if (e == cudaSuccess) return true;
      if (e != cudaErrorNotReady)
        fail("comm", "NCCL call failed on the GPU: {}", cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        fail("comm", "NCCL reported an asynchronous error: {}", ncclGetErrorString(async));
      return false;
    });
  }

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<SeqTracker> tracker_;
  std::mutex mu_;
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
