// What one communication call is (kind, element type, count, reduction, root or peer, and its
// sequence number), so errors and rank-divergence checks can name it exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "framework/core/dtype.hpp"
#include "parallel/comm/reduce_op.hpp"

namespace strata::parallel {

enum class OpKind : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  barrier,
  send,
  recv
};

std::string_view op_kind_name(OpKind k);  // "all_reduce", ...
// Collectives are numbered per group and must be called in the same order on every rank;
// send/recv are numbered per peer.
bool is_collective(OpKind k);

struct OpDesc {
  OpKind kind = OpKind::barrier;
  DType dtype = DType::f32;
  // Elements per rank: all_reduce/broadcast/send/recv the buffer, reduce_scatter the output
  // block, all_gather the input block.
  std::uint64_t count = 0;
  ReduceOp reduce = ReduceOp::sum;  // reductions only
  int peer = -1;                    // broadcast: root; send: destination; recv: source
  int tag = 0;                      // send/recv only
  std::uint64_t seq = 0;  // 1-based: the n-th collective on the group (or n-th send to peer)

  // "all_reduce #3 (f32 × 1000, sum)", "send #2 to rank 1 (bf16 × 7, tag 0)"
  std::string str() const;
  // The part every rank must agree on for a collective: kind, dtype, count, reduction, root.
  bool same_call(const OpDesc& o) const;
};

}  // namespace strata::parallel
