// Sequence numbers of a group's communication calls, and a short history of them, so a rank
// can answer "where are you?" when another rank's call times out, and a divergence between
// ranks can be named.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "parallel/comm/op.hpp"

namespace strata::parallel {

// What one rank has posted on a group, as seen by (or for) another rank.
struct TrackerView {
  std::uint64_t posted = 0;           // collectives posted so far
  std::optional<OpDesc> at;           // the collective it posted as #seq, if still in history
  std::optional<OpDesc> last;         // the last collective it posted
  std::uint64_t sends_to_peer = 0;    // sends it posted to the asking rank
  std::uint64_t recvs_from_peer = 0;  // receives it posted from the asking rank
};

class SeqTracker {
 public:
  static constexpr std::size_t kHistory = 256;
  explicit SeqTracker(int group_size = 0);  // per-peer counters grow on demand

  // Numbers a call: collectives per group, sends/recvs per peer. Returns the op with its seq.
  OpDesc begin(OpDesc op);
  std::uint64_t collectives_posted() const;
  // This rank's state as reported to `asker` about collective #seq.
  TrackerView view_for(int asker, std::uint64_t seq) const;

 private:
  mutable std::mutex mu_;
  std::uint64_t posted_ = 0;
  std::array<OpDesc, kHistory> history_{};
  std::vector<std::uint64_t> sends_, recvs_;
};

}  // namespace strata::parallel
