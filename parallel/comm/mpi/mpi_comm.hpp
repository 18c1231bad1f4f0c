// MpiComm: the MPI transport of one group (CPU buffers). Collectives and send/recv are posted
// as non-blocking MPI calls and finished by the progress engine; a second, duplicated
// communicator carries control traffic: answers to "where are you?" after a timeout, and the
// descriptor exchange of validation mode.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <deque>
#include <memory>

#include "parallel/comm/comm_impl.hpp"
#include "parallel/comm/mpi/runtime.hpp"

namespace strata::parallel::mpi {

class MpiComm final : public CommImpl, public Poller, public std::enable_shared_from_this<MpiComm> {
 public:
  // Takes ownership of `comm` and `ctrl` (freed at shutdown or destruction).
  static std::shared_ptr<MpiComm> create(std::shared_ptr<Runtime> rt, MPI_Comm comm, MPI_Comm ctrl,
                                         std::shared_ptr<SeqTracker> tracker);
  ~MpiComm() override;

  std::string_view transport() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<CommImpl> split(int color, int key, std::shared_ptr<SeqTracker> tracker) override;
  void all_reduce(const Call& c) override;
  void reduce_scatter(const Call& c) override;
  void all_gather(const Call& c) override;
  void broadcast(const Call& c) override;
  void send(const Call& c) override;
  void recv(const Call& c) override;
  void barrier(const Call& c) override;
  std::string explain_stall(const OpDesc& op, const GroupInfo& info,
                            std::chrono::milliseconds budget) override;

  void poll_locked() override;
  void release_locked() override;

  // Fixed-size control messages (int64 words).
  using Query = std::array<std::int64_t, 2>;   // qid, seq
  using Reply = std::array<std::int64_t, 16>;  // see answer_locked()

 private:
  MpiComm() = default;
  using PostFn = std::function<void(std::vector<MPI_Request>&)>;  // runs with the lock held
  using CheckFn = std::function<void(Pending&)>;                  // runs with the lock held
  // Posts `post` now, or after the validation exchange when c.validate; hands the requests to
  // the progress engine, which runs `check` (lock held) and `finish` (no lock) on completion.
  void launch(const Call& c, PostFn post, std::function<void(Pending&)> finish,
              std::vector<std::shared_ptr<const void>> keep = {}, CheckFn check = {});
  void check_live_locked() const;
  void post_query_recv_locked();
  void answer_locked(int asker, const Query& q);

  std::shared_ptr<Runtime> rt_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm ctrl_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<SeqTracker> tracker_;
  bool released_ = false;  // guarded by the runtime lock

  Query query_in_{};
  MPI_Request query_req_ = MPI_REQUEST_NULL;
  struct Outgoing {
    Reply msg{};
    MPI_Request req = MPI_REQUEST_NULL;
  };
  std::deque<std::unique_ptr<Outgoing>> outgoing_;  // replies and queries being sent
  std::atomic<std::int64_t> next_qid_{1};
};

}  // namespace strata::parallel::mpi
