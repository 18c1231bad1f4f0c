#include "parallel/engine/tp_comm.hpp"

#include <chrono>

#include "framework/backend/stream.hpp"

namespace strata::parallel {

namespace {
template <typename F>
void timed(double& into, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  into += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::int64_t nbytes(const Tensor& t) {
  return t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
}
}  // namespace

void GroupTpComm::all_reduce_sum(const Tensor& t) {
  traffic_.all_reduce += nbytes(t);
  ++calls_;
  // The sum is read by the layers' next kernels on t's stream: on a GPU that stream waits for
  // it on the device.
  timed(wait_s_, [&] { tp_.all_reduce(t, ReduceOp::sum).wait_on(current_stream(t.device())); });
}

void GroupTpComm::all_reduce_max(const Tensor& t) {
  traffic_.all_reduce += nbytes(t);
  ++calls_;
  timed(wait_s_, [&] { tp_.all_reduce(t, ReduceOp::max).wait_on(current_stream(t.device())); });
}

void GroupTpComm::all_gather(const Tensor& in, const Tensor& out) {
  traffic_.all_gather += nbytes(out);
  ++calls_;
  timed(wait_s_, [&] { tp_.all_gather(in, out).wait_on(current_stream(out.device())); });
}

void GroupTpComm::reduce_scatter_sum(const Tensor& in, const Tensor& out) {
  traffic_.reduce_scatter += nbytes(in);
  ++calls_;
  timed(wait_s_, [&] {
    tp_.reduce_scatter(in, out, ReduceOp::sum).wait_on(current_stream(out.device()));
  });
}

train::ShardReductions tp_reductions(train::ShardReductions inner, const Group& tp) {
  if (tp.size() == 1) return inner;
  train::ShardReductions r;
  r.sum = [inner, tp](double v) { return tp.all_reduce_value(inner.sum(v), ReduceOp::sum); };
  r.any = [inner, tp](bool b) {
    return tp.all_reduce_value<std::int32_t>(inner.any(b) ? 1 : 0, ReduceOp::max) != 0;
  };
  r.counted_elsewhere = inner.counted_elsewhere;
  r.count_replicated = tp.rank() == 0;
  return r;
}

}  // namespace strata::parallel
