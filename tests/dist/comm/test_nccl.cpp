// The NCCL transport on device buffers, compared with the same collectives' exact values.
// Runs only where every rank has a GPU of its own (skipped on CPU-only machines).
#include <gtest/gtest.h>

#include "framework/backend/cuda_runtime.hpp"
#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;
using parallel::ReduceOp;

namespace {

bool have_gpus(const parallel::Group& g) {
  return cuda::device_count() >= g.size();  // NCCL needs one GPU per rank
}

Tensor on_device(const Tensor& host, int device) {
  Tensor d = Tensor::empty(host.shape(), host.dtype(),
                           TensorOptions{Device::cuda(device), Tier::device, Category::other});
  d.copy_from(host);
  return d;
}

Tensor to_host(const Tensor& dev) {
  Tensor h = Tensor::empty(dev.shape(), dev.dtype());
  h.copy_from(dev);
  return h;
}

}  // namespace

TEST(Nccl, CollectivesOnDeviceBuffers) {
  const auto& g = world();
  if (!have_gpus(g)) GTEST_SKIP() << "needs one GPU per rank";
  const int r = g.rank(), n = g.size(), dev = r;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::size_t count = 100003;
    Tensor x = on_device(make(t, count, [&](std::size_t i) { return value(t, r, i); }), dev);
    g.all_reduce(x, ReduceOp::sum).wait();
    EXPECT_EQ(mismatch(read(to_host(x)),
                       [&](std::size_t i) {
                         double s = 0;
                         for (int q = 0; q < n; ++q) s += value(t, q, i);
                         return s;
                       }),
              "");
    Tensor in = on_device(make(t, count * n, [&](std::size_t i) { return value(t, r, i); }), dev);
    Tensor block = on_device(Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t), dev);
    g.reduce_scatter(in, block, ReduceOp::max).wait();
    EXPECT_EQ(mismatch(read(to_host(block)),
                       [&](std::size_t i) { return value(t, n - 1, count * r + i); }),
              "");
    Tensor gathered = on_device(Tensor::zeros(Shape{static_cast<std::int64_t>(count * n)}, t), dev);
    g.all_gather(block, gathered).wait();
    EXPECT_EQ(mismatch(read(to_host(gathered)), [&](std::size_t i) { return value(t, n - 1, i); }),
              "");
    Tensor b = on_device(make(t, 7, [&](std::size_t i) { return value(t, r, i); }), dev);
    g.broadcast(b, n - 1).wait();
    EXPECT_EQ(mismatch(read(to_host(b)), [&](std::size_t i) { return value(t, n - 1, i); }), "");
  }
  g.barrier().wait();
}

TEST(Nccl, SendRecvRingOnDeviceBuffers) {
  const auto& g = world();
  if (!have_gpus(g)) GTEST_SKIP() << "needs one GPU per rank";
  const int r = g.rank(), n = g.size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor out =
      on_device(make(DType::f32, 1001, [&](std::size_t i) { return value(DType::f32, r, i); }), r);
  Tensor in = on_device(Tensor::zeros(Shape{1001}, DType::f32), r);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // NCCL send/recv block until matched within a stream: even ranks send first.
  parallel::Work a = r % 2 == 0 ? g.send(out, next) : g.recv(in, prev);
  parallel::Work b = r % 2 == 0 ? g.recv(in, prev) : g.send(out, next);
  parallel::wait_all({a, b});
  EXPECT_EQ(mismatch(read(to_host(in)), [&](std::size_t i) { return value(DType::f32, prev, i); }),
            "");
}
