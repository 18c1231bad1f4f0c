// CommImpl: the interface a transport (MPI, NCCL, local) implements behind Group. It holds only
// what the engine uses; Group validates and numbers every call before it reaches a transport.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/comm/buffer.hpp"
#include "parallel/comm/tracker.hpp"
#include "parallel/comm/work.hpp"

namespace strata::parallel {

// Who a group is, for messages: "group 'world.0' (size 2, world ranks [0, 2])".
struct GroupInfo {
  std::string name;
  std::vector<int> world_ranks;  // world rank of each group rank
  std::string describe() const;
  // "rank 1" or, when it differs, "rank 1 (world rank 3)".
  std::string rank_name(int group_rank) const;
};

// One validated, numbered call. `in` is read, `out` written (broadcast and recv use `out` only,
// send uses `in` only); work->op() says what it is.
struct Call {
  std::shared_ptr<WorkState> work;
  ConstSpan in;
  Span out;
  bool validate = false;  // check every rank posted the same collective before running it
};

class CommImpl {
 public:
  virtual ~CommImpl() = default;
  virtual std::string_view transport() const = 0;  // "mpi", "nccl", "local"
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The communicator of the ranks that passed the same color, ordered by (key, rank). Called on
  // every rank after Group has exchanged the colours (so every rank has arrived).
  virtual std::shared_ptr<CommImpl> split(int color, int key,
                                          std::shared_ptr<SeqTracker> tracker) = 0;

  // Each starts the call and returns at once; the transport completes (or fails) call.work.
  virtual void all_reduce(const Call& c) = 0;
  virtual void reduce_scatter(const Call& c) = 0;  // in: size*count, out: count (block rank)
  virtual void all_gather(const Call& c) = 0;      // in: count, out: size*count
  virtual void broadcast(const Call& c) = 0;       // out: the buffer, root = op().peer
  virtual void send(const Call& c) = 0;
  virtual void recv(const Call& c) = 0;
  virtual void barrier(const Call& c) = 0;

  // Asks the other ranks where they are, to explain why `op` has not completed here, within
  // `budget`. Empty when there is nothing to add.
  virtual std::string explain_stall(const OpDesc& op, const GroupInfo& info,
                                    std::chrono::milliseconds budget) = 0;
};

}  // namespace strata::parallel
