#include "parallel/comm/tracker.hpp"

namespace strata::parallel {

SeqTracker::SeqTracker(int group_size)
    : sends_(static_cast<std::size_t>(group_size), 0),
      recvs_(static_cast<std::size_t>(group_size), 0) {}

OpDesc SeqTracker::begin(OpDesc op) {
  std::lock_guard lk(mu_);
  if (is_collective(op.kind)) {
    op.seq = ++posted_;
    history_[op.seq % kHistory] = op;
  } else {
    const auto peer = static_cast<std::size_t>(op.peer);
    if (peer >= sends_.size()) {
      sends_.resize(peer + 1, 0);
      recvs_.resize(peer + 1, 0);
    }
    auto& counts = op.kind == OpKind::send ? sends_ : recvs_;
    op.seq = ++counts[peer];
  }
  return op;
}

std::uint64_t SeqTracker::collectives_posted() const {
  std::lock_guard lk(mu_);
  return posted_;
}

TrackerView SeqTracker::view_for(int asker, std::uint64_t seq) const {
  std::lock_guard lk(mu_);
  TrackerView v;
  v.posted = posted_;
  if (seq >= 1 && seq <= posted_ && posted_ - seq < kHistory) v.at = history_[seq % kHistory];
  if (posted_ > 0) v.last = history_[posted_ % kHistory];
  if (asker >= 0 && static_cast<std::size_t>(asker) < sends_.size()) {
    v.sends_to_peer = sends_[static_cast<std::size_t>(asker)];
    v.recvs_from_peer = recvs_[static_cast<std::size_t>(asker)];
  }
  return v;
}

}  // namespace strata::parallel
