// The planning transport (planning.hpp): every call completes at once, as if every rank had
// contributed what this one did; meta buffers move nothing.
#include <cstring>
#include <numeric>

#include "framework/core/error.hpp"
#include "parallel/comm/group_state.hpp"
#include "parallel/comm/planning.hpp"

namespace strata::parallel {

namespace {

bool host(const ConstSpan& s) { return s.data && !s.device.is_meta(); }

class PlanningComm final : public CommImpl {
 public:
  PlanningComm(int size, int rank) : size_(size), rank_(rank) {}

  std::string_view transport() const override { return kPlanningTransport; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<CommImpl> split(int, int, std::shared_ptr<SeqTracker>) override {
    // Group::split gathered the colours: with every rank passing ours, the child is all of us.
    return std::make_shared<PlanningComm>(size_, rank_);
  }
  void all_reduce(const Call& c) override {
    if (host(c.in) && c.in.data != c.out.data) std::memmove(c.out.data, c.in.data, c.out.nbytes());
    c.work->complete();
  }
  void reduce_scatter(const Call& c) override {
    if (host(c.in))
      std::memmove(c.out.data, static_cast<const char*>(c.in.data) + c.out.nbytes() * rank_,
                   c.out.nbytes());
    c.work->complete();
  }
  void all_gather(const Call& c) override {
    if (host(c.in)) {
      const std::size_t block = c.in.nbytes();
      for (int r = 0; r < size_; ++r) {
        char* dst = static_cast<char*>(c.out.data) + block * r;
        if (dst != c.in.data) std::memmove(dst, c.in.data, block);
      }
    }
    c.work->complete();
  }
  void broadcast(const Call& c) override { c.work->complete(); }
  void barrier(const Call& c) override { c.work->complete(); }
  void send(const Call& c) override { point_to_point(c, c.in); }
  void recv(const Call& c) override { point_to_point(c, c.out); }
  std::string explain_stall(const OpDesc&, const GroupInfo&, std::chrono::milliseconds) override {
    return {};
  }

 private:
  static void point_to_point(const Call& c, const ConstSpan& buf) {
    if (host(buf))
      c.work->fail("a planning group has no peer to exchange host data with (only meta buffers "
                   "can be sent or received in a plan)");
    else
      c.work->complete();
  }

  int size_, rank_;
};

}  // namespace

Group planning_world(int size, int rank, std::string name) {
  if (size < 1 || rank < 0 || rank >= size)
    user_fail("comm", "a planning world of {} ranks has no rank {}", size, rank);
  auto st = std::make_shared<GroupState>();
  st->tracker = std::make_shared<SeqTracker>(size);
  st->host = std::make_shared<PlanningComm>(size, rank);
  st->device_via_host = true;
  st->info.name = std::move(name);
  st->info.world_ranks.resize(static_cast<std::size_t>(size));
  std::iota(st->info.world_ranks.begin(), st->info.world_ranks.end(), 0);
  st->desc = st->info.describe();
  return Group(st);
}

bool is_planning(const Group& g) { return g.valid() && g.transport() == kPlanningTransport; }

}  // namespace strata::parallel
