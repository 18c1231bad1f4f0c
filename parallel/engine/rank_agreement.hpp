// Ending a collective operation the same way on every rank: when some ranks fail (a corrupt
// slice only one rank reads, rank 0's choice of checkpoint), every rank raises the same error, so
// no rank goes on to a collective the others have left, and all take the same decision.
#pragma once

#include <exception>
#include <string>

#include "parallel/comm/group.hpp"

namespace strata::parallel {

// Collective: root's s on every rank.
void broadcast_string(const Group& g, std::string& s, int root = 0);
// Collective: returns when no rank failed (mine == nullptr everywhere); otherwise every rank
// throws the error of the lowest failing rank — that rank its own exception, the others the same
// type (checkpoint::CheckpointError, UserError or Error) and tag with "(rank N) " before the
// message.
void agree_or_throw(const Group& g, std::exception_ptr mine);

// Collective: runs f() (returning a string) on rank 0 only; every rank gets its result, or
// throws its error.
template <typename F>
std::string on_rank0(const Group& g, F&& f) {
  std::string out;
  std::exception_ptr err;
  if (g.rank() == 0) {
    try {
      out = f();
    } catch (...) {
      err = std::current_exception();
    }
  }
  agree_or_throw(g, err);
  broadcast_string(g, out, 0);
  return out;
}

}  // namespace strata::parallel
