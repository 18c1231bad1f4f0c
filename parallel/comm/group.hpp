// Group: a set of ranks that communicate — a cheap value (rank, size, split) over a shared
// CommImpl. Every call is non-blocking and returns a Work. CPU buffers go to MPI (or the local
// transport when run without a launcher), CUDA buffers to NCCL when every rank of the group has a
// GPU of its own, else through pinned host memory to MPI (device_transport()).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"
#include "parallel/comm/buffer.hpp"
#include "parallel/comm/reduce_op.hpp"
#include "parallel/comm/work.hpp"

namespace strata::parallel {

struct GroupState;
class CommImpl;
struct Call;

class Group {
 public:
  Group() = default;  // not a group: every call throws; see init_world()
  explicit Group(std::shared_ptr<GroupState> s);

  bool valid() const { return s_ != nullptr; }
  int rank() const;
  int size() const;
  const std::string& name() const;
  const std::vector<int>& world_ranks() const;  // world rank of each member, by group rank
  std::string describe() const;                 // "group 'world' (size 4, world ranks [0..3])"
  std::string_view transport() const;           // transport of CPU buffers: "mpi" or "local"
  // Transport of device buffers: "nccl" (every rank has a GPU of its own), "staged" (through
  // pinned host memory and the host transport: ranks share a GPU, or no NCCL), "local" (one
  // rank); "" until the group's first call on device buffers chose it.
  std::string device_transport() const;

  // The group of the ranks that pass the same color (>= 0), ordered by (key, rank). Collective
  // over this group: every member must call it. The child is named `name`, or "<name>.<color>",
  // and inherits the timeout and validation setting.
  Group split(int color, int key, std::string name = {}) const;

  // How long Work::wait() waits (default: strata.comm.timeout_s, 300 s). Shared by all copies;
  // set it on every rank.
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds t) const;
  // Validation: before each collective runs, the ranks exchange (seq, op, dtype, count) and a
  // mismatch fails the call on every rank, naming the ranks. Costs one tiny all-gather per
  // collective; off by default (a stall is explained anyway when a wait times out). Must be the
  // same on every rank.
  bool validate() const;
  void set_validate(bool on) const;
  // Collectives posted on this group so far (the next one is number sequence() + 1).
  std::uint64_t sequence() const;

  // Tensor calls: contiguous tensors, kept alive by the Work until it completes.
  Work all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum) const;  // in place
  Work all_reduce(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum) const;
  // in has size()*n elements, out n: rank r gets the reduction of block r.
  Work reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum) const;
  // in has n elements, out size()*n: block r is rank r's input.
  Work all_gather(const Tensor& in, const Tensor& out) const;
  Work broadcast(const Tensor& t, int root) const;
  Work send(const Tensor& t, int dst, int tag = 0) const;
  Work recv(const Tensor& t, int src, int tag = 0) const;
  Work barrier() const;

  // The same over raw memory (the caller keeps it alive until the Work completes).
  Work all_reduce(ConstSpan in, Span out, ReduceOp op = ReduceOp::sum) const;
  Work reduce_scatter(ConstSpan in, Span out, ReduceOp op = ReduceOp::sum) const;
  Work all_gather(ConstSpan in, Span out) const;
  Work broadcast(Span buf, int root) const;
  Work send(ConstSpan buf, int dst, int tag = 0) const;
  Work recv(Span buf, int src, int tag = 0) const;

  // Collective and blocking: a few values per rank (a loss, a flag, a partial sum) reduced
  // element-wise over the group; every rank returns the result. The values travel in memory the
  // call keeps alive, so a wait that times out leaves nothing dangling. `wait` replaces
  // Work::wait() (e.g. polling from a background thread). A group of one returns v at once.
  using WaitFn = std::function<void(const Work&)>;
  template <typename T, std::size_t N>
  std::array<T, N> all_reduce_values(const std::array<T, N>& v, ReduceOp op,
                                     const WaitFn& wait = {}) const;
  template <typename T>
  T all_reduce_value(T v, ReduceOp op, const WaitFn& wait = {}) const {
    return all_reduce_values(std::array<T, 1>{v}, op, wait)[0];
  }

 private:
  friend struct GroupTestAccess;  // parallel/comm/testing.cpp
  GroupState& state() const;
  std::shared_ptr<CommImpl> make_device_transport(OpKind kind, Device dev) const;
  Work start(OpDesc op, ConstSpan in, Span out, void (CommImpl::*fn)(const Call&),
             std::vector<std::shared_ptr<const void>> keep = {}) const;

  std::shared_ptr<GroupState> s_;
};

template <typename T, std::size_t N>
std::array<T, N> Group::all_reduce_values(const std::array<T, N>& v, ReduceOp op,
                                          const WaitFn& wait) const {
  if (size() == 1) return v;
  auto buf = std::make_shared<std::array<T, N>>(v);
  const Work w = all_reduce(span(static_cast<const T*>(buf->data()), N), span(buf->data(), N), op);
  w.keep_alive(buf);
  if (wait) {
    wait(w);
  } else {
    w.wait();
  }
  return *buf;
}

}  // namespace strata::parallel
