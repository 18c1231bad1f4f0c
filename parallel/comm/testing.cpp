#include "parallel/comm/testing.hpp"

#include "parallel/comm/group_state.hpp"
#include "parallel/comm/transports.hpp"

namespace strata::parallel {

namespace comm_testing {

// Forwards every call to the host transport, send/recv with tag 0 (through a Work of its own, which
// the caller's Work polls).
class TagsIgnoredComm final : public CommImpl {
 public:
  explicit TagsIgnoredComm(std::shared_ptr<CommImpl> host) : host_(std::move(host)) {}
  std::string_view transport() const override { return host_->transport(); }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::shared_ptr<CommImpl> split(int color, int key, std::shared_ptr<SeqTracker> t) override {
    return std::make_shared<TagsIgnoredComm>(host_->split(color, key, std::move(t)));
  }
  void all_reduce(const Call& c) override { host_->all_reduce(c); }
  void reduce_scatter(const Call& c) override { host_->reduce_scatter(c); }
  void all_gather(const Call& c) override { host_->all_gather(c); }
  void broadcast(const Call& c) override { host_->broadcast(c); }
  void barrier(const Call& c) override { host_->barrier(c); }
  void send(const Call& c) override { untagged(c, &CommImpl::send); }
  void recv(const Call& c) override { untagged(c, &CommImpl::recv); }
  std::string explain_stall(const OpDesc& op, const GroupInfo& info,
                            std::chrono::milliseconds budget) override {
    return host_->explain_stall(op, info, budget);
  }

 private:
  void untagged(const Call& c, void (CommImpl::*fn)(const Call&)) {
    OpDesc op = c.work->op();
    op.tag = 0;
    auto inner = std::make_shared<WorkState>(op, c.work->group(), c.work->timeout());
    c.work->set_poll([inner]() {
      if (!inner->is_completed()) return false;
      inner->wait(std::chrono::milliseconds(0));  // rethrows its failure
      return true;
    });
    (host_.get()->*fn)(Call{inner, c.in, c.out, c.validate});
  }

  std::shared_ptr<CommImpl> host_;
};

}  // namespace comm_testing

struct GroupTestAccess {
  template <typename Wrap>
  static Group wrap(const Group& g, Wrap&& wrap_host) {
    const GroupState& st = g.state();
    auto s = std::make_shared<GroupState>();
    s->info = st.info;
    s->desc = st.desc;
    s->tracker = st.tracker;
    s->host = wrap_host(st.host);
    s->device_via_host = st.device_via_host;
    s->timeout_ms.store(st.timeout_ms.load());
    s->validate.store(st.validate.load());
    s->world_anchor = g.s_;  // g's state (and through it the world's transport) stays alive
    return Group(std::move(s));
  }
};

namespace testing {

Group staged_cpu_buffers(const Group& g) {
  return GroupTestAccess::wrap(
      g, [](const std::shared_ptr<CommImpl>& h) { return staged::init_for_cpu_buffers(h); });
}

Group tags_ignored(const Group& g) {
  return GroupTestAccess::wrap(g, [](const std::shared_ptr<CommImpl>& h) {
    return std::make_shared<comm_testing::TagsIgnoredComm>(h);
  });
}

}  // namespace testing

}  // namespace strata::parallel
