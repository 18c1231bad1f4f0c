// Several ranks on GPUs, under mpirun -np 2 (ctest gpu_dist_np2, labelled cuda: the GPU check runs
// it). On a machine with one GPU both ranks share it, so device buffers take the host-staged
// transport (NCCL refuses two ranks on one GPU); with a GPU per rank they take NCCL. Checked:
// which transport the group chose; every collective and send/recv on device buffers against the
// same call on host buffers; with NCCL, a consumer stream ordered by the Work's device event;
// GPT training at ZeRO 0-3 on the GPU against one rank with the whole global batch; and the same
// with offload from the GPU (optimizer state, gradients, ZeRO-3 parameters in host memory) against
// the run on the GPU, bitwise. Without a GPU the executable exits 77 before MPI starts
// (tests/dist/comm/main.cpp), which ctest counts as skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/backend/ops/ops.hpp"
#include "framework/backend/stream.hpp"
#include "parallel/comm/device_support.hpp"
#include "parallel/comm/transports.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/adamw_job.hpp"
#include "tests/dist/engine/zero_fixture.hpp"
#include "tests/dist/gpu/gpu_env.hpp"

using namespace strata;
using namespace strata::test;
using parallel::ReduceOp;

namespace {
namespace test_gpu_dist {  // file-local names, unique in a unity build

// The transport device buffers of `g` must take: one rank "local"; a GPU per rank (by UUID) and
// NCCL "nccl"; else "staged". Collective over g (host buffers).
std::string expected_transport(const parallel::Group& g) {
  if (g.size() == 1) return "local";
  const auto id = parallel::device_support::identify(rank_device(world().rank()));
  std::vector<std::uint8_t> all(16 * static_cast<std::size_t>(g.size()));
  g.all_gather(parallel::span(id.uuid.data(), 16), parallel::span(all.data(), all.size())).wait();
  bool distinct = true;
  for (std::size_t a = 0; a < static_cast<std::size_t>(g.size()); ++a)
    for (std::size_t b = a + 1; b < static_cast<std::size_t>(g.size()); ++b)
      distinct = distinct && !std::equal(all.begin() + static_cast<std::ptrdiff_t>(16 * a),
                                         all.begin() + static_cast<std::ptrdiff_t>(16 * a + 16),
                                         all.begin() + static_cast<std::ptrdiff_t>(16 * b));
  return distinct && parallel::nccl::is_available() ? "nccl" : "staged";
}

// The dtypes NCCL and the staged path both carry (NCCL has no 16-bit integers).
const std::vector<DType>& device_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                       DType::i8,  DType::u8,  DType::i32,  DType::i64};
  return d;
}

// Waits for `w` as a consumer on the GPU would (its stream waits, the host does not), or on the
// host: every other call each way.
void finish(const parallel::Work& w, int device, int& k) {
  if (k++ % 2 == 0) w.wait_on(current_stream(Device::cuda(device)));
  else w.wait();
}

TEST(GpuDist, cuda_DeviceBuffersTakeTheExpectedTransport) {
  const auto& g = world();
  const int dev = rank_device(g.rank());
  const std::string want = expected_transport(g);
  Tensor x = on_device(make(DType::f32, 5, [&](std::size_t) { return g.rank() + 1.0; }), dev);
  g.all_reduce(x).wait();
  EXPECT_EQ(g.device_transport(), want);
  EXPECT_EQ(read(to_host(x))[4], g.size() * (g.size() + 1) / 2.0);
  if (g.rank() == 0)
    std::printf("%d ranks on %d visible GPU(s): device buffers take the %s transport\n", g.size(),
                cuda::device_count(), g.device_transport().c_str());
}

TEST(GpuDist, cuda_CollectivesOnDeviceBuffersMatchTheHost) {
  const auto& g = world();
  const int r = g.rank(), n = g.size(), dev = rank_device(r);
  int k = 0;
  for (DType t : device_dtypes())
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{100003}}) {
      SCOPED_TRACE(fmt::format("{} × {}", dtype_name(t), count));
      auto mine = [&](std::size_t i) { return value(t, r, i); };
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        SCOPED_TRACE(std::string(reduce_op_name(op)));
        // all_reduce, in place and out of place.
        Tensor host = make(t, count, mine);
        g.all_reduce(host, op).wait();
        const std::vector<double> want = read(host);
        Tensor x = on_device(make(t, count, mine), dev);
        finish(g.all_reduce(x, op), dev, k);
        EXPECT_EQ(read(to_host(x)), want) << "all_reduce in place";
        Tensor in = on_device(make(t, count, mine), dev);
        Tensor out = on_device(Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t), dev);
        finish(g.all_reduce(in, out, op), dev, k);
        EXPECT_EQ(read(to_host(out)), want) << "all_reduce";
        EXPECT_EQ(mismatch(read(to_host(in)), mine), "") << "all_reduce changed its input";
        // reduce_scatter: into a separate block, and into this rank's block of the input.
        const std::size_t total = count * static_cast<std::size_t>(n);
        Tensor hflat = make(t, total, mine);
        Tensor hblock = Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t);
        g.reduce_scatter(hflat, hblock, op).wait();
        const std::vector<double> want_block = read(hblock);
        Tensor flat = on_device(make(t, total, mine), dev);
        Tensor block = on_device(Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t), dev);
        finish(g.reduce_scatter(flat, block, op), dev, k);
        EXPECT_EQ(read(to_host(block)), want_block) << "reduce_scatter";
        Tensor own = flat.slice(0, static_cast<std::int64_t>(count) * r,
                                static_cast<std::int64_t>(count) * (r + 1));
        finish(g.reduce_scatter(flat, own, op), dev, k);
        EXPECT_EQ(read(to_host(own)), want_block) << "reduce_scatter into its own block";
      }
      // all_gather, out of place and in place.
      const std::size_t total = count * static_cast<std::size_t>(n);
      Tensor hpart = make(t, count, mine);
      Tensor hwhole = Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t);
      g.all_gather(hpart, hwhole).wait();
      const std::vector<double> want_whole = read(hwhole);
      Tensor part = on_device(hpart, dev);
      Tensor whole = on_device(Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t), dev);
      finish(g.all_gather(part, whole), dev, k);
      EXPECT_EQ(read(to_host(whole)), want_whole) << "all_gather";
      Tensor out = on_device(Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t), dev);
      Tensor slot = out.slice(0, static_cast<std::int64_t>(count) * r,
                              static_cast<std::int64_t>(count) * (r + 1));
      slot.copy_from(hpart);
      finish(g.all_gather(slot, out), dev, k);
      EXPECT_EQ(read(to_host(out)), want_whole) << "all_gather in place";
      // broadcast from the last rank.
      Tensor b = on_device(make(t, count, mine), dev);
      finish(g.broadcast(b, n - 1), dev, k);
      EXPECT_EQ(mismatch(read(to_host(b)), [&](std::size_t i) { return value(t, n - 1, i); }), "");
    }
  g.barrier().wait();
}

TEST(GpuDist, cuda_SendRecvOnDeviceBuffersWithTags) {
  const auto& g = world();
  const int r = g.rank(), n = g.size(), dev = rank_device(r);
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DType t : {DType::f32, DType::bf16, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Tensor a = on_device(make(t, 100003, [&](std::size_t i) { return value(t, r, i); }), dev);
    Tensor b = on_device(make(t, 7, [&](std::size_t i) { return value(t, r, i + 3); }), dev);
    Tensor ra = on_device(Tensor::zeros(Shape{100003}, t), dev);
    Tensor rb = on_device(Tensor::zeros(Shape{7}, t), dev);
    // NCCL pairs by posting order (its tags are ignored; nccl_comm.cpp) and blocks its stream
    // until a transfer is matched: even ranks send first, odd ranks receive first, each in the
    // order of the tags — which is also how MPI's tags pair them on the staged path.
    std::vector<parallel::Work> w;
    if (r % 2 == 0) {
      w.push_back(g.send(a, next, 11));
      w.push_back(g.send(b, next, 12));
      w.push_back(g.recv(ra, prev, 11));
      w.push_back(g.recv(rb, prev, 12));
    } else {
      w.push_back(g.recv(ra, prev, 11));
      w.push_back(g.recv(rb, prev, 12));
      w.push_back(g.send(a, next, 11));
      w.push_back(g.send(b, next, 12));
    }
    int k = 0;
    for (const auto& x : w) finish(x, dev, k);
    EXPECT_EQ(mismatch(read(to_host(ra)), [&](std::size_t i) { return value(t, prev, i); }), "");
    EXPECT_EQ(mismatch(read(to_host(rb)), [&](std::size_t i) { return value(t, prev, i + 3); }),
              "");
  }
}

// NCCL's ordering: the collective waits for the kernels queued before it on the posting thread's
// stream (here a scale of its input), and a kernel queued after Work::wait_on reads its result
// without the host waiting in between.
TEST(GpuDist, cuda_NcclOrdersTheCallersStreamBothWays) {
  const auto& g = world();
  if (expected_transport(g) != "nccl")
    GTEST_SKIP() << "NCCL needs a GPU per rank: " << g.size() << " ranks share "
                 << cuda::device_count() << " visible GPU(s), so they take the host-staged path";
  const int r = g.rank(), n = g.size(), dev = rank_device(r);
  const std::size_t count = 1 << 22;
  Tensor x = on_device(make(DType::f32, count, [&](std::size_t i) { return value(DType::f32, r, i); }), dev);
  for (int round = 0; round < 3; ++round) {
    ops::scale_inplace(x, 2.0f);  // queued; the all-reduce must see it
    parallel::Work w = g.all_reduce(x, ReduceOp::sum);
    w.wait_on(current_stream(Device::cuda(dev)));
    ops::scale_inplace(x, 0.5f);  // queued after the all-reduce, on the device
  }
  const std::vector<double> got = read(to_host(x));
  // Each round: (sum over ranks of 2v) / 2 = sum over ranks of v, so x_k = n^(k-1) * sum_r v.
  EXPECT_EQ(mismatch(got,
                     [&](std::size_t i) {
                       double s = 0;
                       for (int q = 0; q < n; ++q) s += value(DType::f32, q, i);
                       return s * n * n;
                     }),
            "");
}

class GpuDataParallel : public ::testing::TestWithParam<int> {};

// The N-ranks-equals-1-rank test of tests/dist/engine (test_zero.cpp) on the GPU: ZeRO stage s on
// N ranks (micro-batch 2 each, accumulation 2) against stage 0 on one rank with the whole global
// batch, 5 steps of AdamW with clipping: every loss within 1e-6 relative, the fp32 masters within
// 1e-5 relative L2.
TEST_P(GpuDataParallel, cuda_MatchesOneRankWithTheWholeBatch) {
  const int stage = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, accum = 2, steps = 5;
  const auto c = tiny_gpt();
  config::Config cfg = adamw_job(b, accum, stage);
  config::Config ref_cfg = adamw_job(N * b, accum, 0);
  cfg.strata.device = ref_cfg.strata.device = DeviceType::cuda;
  Replica dp(c, cfg, w);
  Replica ref(c, ref_cfg, w.split(w.rank(), 0, "self"));
  BatchFeed feed{N, w.rank(), b, c.block_size, c.vocab_size};
  BatchFeed ref_feed{1, 0, N * b, c.block_size, c.vocab_size};
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    const auto a = dp.engine.train_step(std::ref(feed));
    const auto e = ref.engine.train_step(std::ref(ref_feed));
    ASSERT_TRUE(std::isfinite(a.loss)) << "step " << s;
    worst = std::max(worst, std::abs(a.loss - e.loss) / e.loss);
    EXPECT_NEAR(a.loss, e.loss, 1e-6 * e.loss) << "step " << s;
  }
  const auto wd = dp.master_weights(), wr = ref.master_weights();
  ASSERT_EQ(wd.size(), wr.size());
  const double l2 = rel_l2(wd, wr);
  EXPECT_LT(l2, 1e-5);
  const std::string transport = dp.engine.dp().device_transport();
  if (N > 1) {
    EXPECT_EQ(transport, expected_transport(dp.engine.dp()));
  }
  if (w.rank() == 0)
    std::printf("np=%d ZeRO %d on the GPU (%s): losses within %.2e of one rank, masters L2 %.2e\n",
                N, stage, transport.c_str(), worst, l2);
}

INSTANTIATE_TEST_SUITE_P(Stages, GpuDataParallel, ::testing::Values(0, 1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "zero" + std::to_string(i.param);
                         });

class GpuOffload : public ::testing::TestWithParam<int> {};

// Offload from the GPU on N ranks (ranks sharing one GPU take the host-staged transport, a GPU
// each NCCL): the optimizer state and gradients in host memory at ZeRO stage s, and at stage 3 the
// parameter slices too, bitwise the same N ranks with everything on the GPU (losses, gradient
// norms, masters), and like one rank with the whole global batch (losses within 1e-6 relative).
TEST_P(GpuOffload, cuda_OffloadIsBitwiseTheRunOnTheGpuAndLikeOneRank) {
  const int stage = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, accum = 2, steps = 4;
  const auto c = tiny_gpt();
  config::Config cfg = adamw_job(b, accum, stage);
  cfg.strata.device = DeviceType::cuda;
  config::Config off = cfg;
  off.zero_optimization.offload_optimizer.device = config::OffloadDevice::cpu;
  if (stage == 3) off.zero_optimization.offload_param.device = config::OffloadDevice::cpu;
  config::Config ref_cfg = adamw_job(N * b, accum, 0);
  ref_cfg.strata.device = DeviceType::cuda;
  Replica gpu(c, cfg, w);
  Replica offloaded(c, off, w);
  Replica ref(c, ref_cfg, w.split(w.rank(), 0, "self"));
  BatchFeed f0{N, w.rank(), b, c.block_size, c.vocab_size}, f1 = f0;
  BatchFeed ref_feed{1, 0, N * b, c.block_size, c.vocab_size};
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    const auto a = gpu.engine.train_step(std::ref(f0));
    const auto o = offloaded.engine.train_step(std::ref(f1));
    const auto e = ref.engine.train_step(std::ref(ref_feed));
    ASSERT_TRUE(std::isfinite(o.loss)) << "step " << s;
    EXPECT_EQ(o.loss, a.loss) << "step " << s;
    EXPECT_EQ(o.result.grad_norm, a.result.grad_norm) << "step " << s;
    worst = std::max(worst, std::abs(o.loss - e.loss) / e.loss);
    EXPECT_NEAR(o.loss, e.loss, 1e-6 * e.loss) << "step " << s;
  }
  EXPECT_EQ(offloaded.master_weights(), gpu.master_weights());
  EXPECT_LT(rel_l2(offloaded.master_weights(), ref.master_weights()), 1e-5);
  if (w.rank() == 0)
    std::printf("np=%d ZeRO %d with offload from the GPU (%s): bitwise the run on the GPU, losses "
                "within %.2e of one rank\n", N, stage,
                offloaded.engine.dp().device_transport().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Stages, GpuOffload, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "zero" + std::to_string(i.param);
                         });

}  // namespace test_gpu_dist
}  // namespace
