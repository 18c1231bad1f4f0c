#include "parallel/comm/op.hpp"

#include <fmt/format.h>

namespace strata::parallel {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::barrier:
      return "barrier";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
  }
  return "?";
}

bool is_collective(OpKind k) {
  return k != OpKind::send && k != OpKind::recv;
}

std::string OpDesc::str() const {
  const auto name = op_kind_name(kind);
  switch (kind) {
    case OpKind::barrier:
      return fmt::format("{} #{}", name, seq);
    case OpKind::all_reduce:
    case OpKind::reduce_scatter:
      return fmt::format("{} #{} ({} × {}, {})", name, seq, dtype_name(dtype), count,
                         reduce_op_name(reduce));
    case OpKind::all_gather:
      return fmt::format("{} #{} ({} × {})", name, seq, dtype_name(dtype), count);
    case OpKind::broadcast:
      return fmt::format("{} #{} ({} × {}, root {})", name, seq, dtype_name(dtype), count, peer);
    case OpKind::send:
      return fmt::format("send #{} to rank {} ({} × {}, tag {})", seq, peer, dtype_name(dtype),
                         count, tag);
    case OpKind::recv:
      return fmt::format("recv #{} from rank {} ({} × {}, tag {})", seq, peer, dtype_name(dtype),
                         count, tag);
  }
  return std::string(name);
}

bool OpDesc::same_call(const OpDesc& o) const {
  if (kind != o.kind) return false;
  if (kind == OpKind::barrier) return true;
  if (dtype != o.dtype || count != o.count) return false;
  if ((kind == OpKind::all_reduce || kind == OpKind::reduce_scatter) && reduce != o.reduce)
    return false;
  if (kind == OpKind::broadcast && peer != o.peer) return false;
  return true;
}

}  // namespace strata::parallel
