// The host-staged device transport's logic on CPU buffers (parallel::testing::staged_cpu_buffers:
// the staging, the host call on the staging buffers and the copy back before the Work completes,
// with memcpy for the GPU's copies): every collective and send/recv against exact values, in place
// and out of place, validation, a failure and a timeout passing through, and split groups; and
// the NCCL stand-in (testing::tags_ignored) pairing sends and receives by posting order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "parallel/comm/testing.hpp"
#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;
using parallel::ReduceOp;
using ::testing::HasSubstr;

namespace {
namespace test_staged {  // file-local names, unique in a unity build

double reduced(DType t, ReduceOp op, int n, std::size_t i) {
  double sum = 0, mx = -1e300;
  for (int r = 0; r < n; ++r) {
    sum += value(t, r, i);
    mx = std::max(mx, value(t, r, i));
  }
  if (op == ReduceOp::sum) return sum;
  if (op == ReduceOp::max) return mx;
  return expected_avg(t, sum, n);
}

// A staged group of its own for one test (its own communicator: nothing left from another test).
parallel::Group staged(const char* name) {
  return parallel::testing::staged_cpu_buffers(world().split(0, world().rank(), name));
}


TEST(Staged, TheCpuBuffersTakeTheStagedTransport) {
  const parallel::Group g = staged("staged_transport");
  EXPECT_EQ(g.transport(), "staged");
  EXPECT_EQ(g.size(), world().size());
  EXPECT_EQ(g.rank(), world().rank());
  EXPECT_EQ(g.split(0, g.rank(), "child").transport(), "staged");  // splits stay staged
}

TEST(Staged, CollectivesEveryDtypeAndOpInPlaceAndNot) {
  const parallel::Group g = staged("staged_collectives");
  const int r = g.rank(), n = g.size();
  for (DType t : all_dtypes())
    for (std::size_t count : {std::size_t{0}, std::size_t{7}, std::size_t{100003}}) {
      SCOPED_TRACE(fmt::format("{} × {}", dtype_name(t), count));
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        SCOPED_TRACE(std::string(reduce_op_name(op)));
        Tensor x = make(t, count, [&](std::size_t i) { return value(t, r, i); });
        g.all_reduce(x, op).wait();
        EXPECT_EQ(mismatch(read(x), [&](std::size_t i) { return reduced(t, op, n, i); }), "");
        Tensor in = make(t, count, [&](std::size_t i) { return value(t, r, i); });
        Tensor out = Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t);
        g.all_reduce(in, out, op).wait();
        EXPECT_EQ(mismatch(read(out), [&](std::size_t i) { return reduced(t, op, n, i); }), "");
        EXPECT_EQ(mismatch(read(in), [&](std::size_t i) { return value(t, r, i); }), "");
        // reduce_scatter: into a separate block, and into this rank's block of the input.
        const std::size_t total = count * static_cast<std::size_t>(n);
        const std::size_t base = count * static_cast<std::size_t>(r);
        Tensor flat = make(t, total, [&](std::size_t i) { return value(t, r, i); });
        Tensor block = Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t);
        g.reduce_scatter(flat, block, op).wait();
        EXPECT_EQ(mismatch(read(block), [&](std::size_t i) { return reduced(t, op, n, base + i); }),
                  "");
        Tensor mine = flat.slice(0, static_cast<std::int64_t>(base),
                                 static_cast<std::int64_t>(base + count));
        g.reduce_scatter(flat, mine, op).wait();
        EXPECT_EQ(mismatch(read(mine), [&](std::size_t i) { return reduced(t, op, n, base + i); }),
                  "");
      }
      // all_gather: out of place, and in place (the input is this rank's block of the output).
      const std::size_t total = count * static_cast<std::size_t>(n);
      Tensor part = make(t, count, [&](std::size_t i) { return value(t, r, i); });
      Tensor whole = Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t);
      g.all_gather(part, whole).wait();
      auto gathered = [&](std::size_t i) {
        return value(t, static_cast<int>(count ? i / count : 0), count ? i % count : 0);
      };
      EXPECT_EQ(mismatch(read(whole), gathered), "");
      Tensor out = Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t);
      Tensor slot = out.slice(0, static_cast<std::int64_t>(count) * r,
                              static_cast<std::int64_t>(count) * (r + 1));
      slot.copy_from(part);
      g.all_gather(slot, out).wait();
      EXPECT_EQ(mismatch(read(out), gathered), "");
      // broadcast from the last rank.
      Tensor b = make(t, count, [&](std::size_t i) { return value(t, r, i); });
      g.broadcast(b, n - 1).wait();
      EXPECT_EQ(mismatch(read(b), [&](std::size_t i) { return value(t, n - 1, i); }), "");
    }
  g.barrier().wait();
}

TEST(Staged, SendRecvRingWithTagsOutOfOrder) {
  const parallel::Group g = staged("staged_p2p");
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DType t : {DType::f32, DType::bf16, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Tensor a = make(t, 1001, [&](std::size_t i) { return value(t, r, i); });
    Tensor b = make(t, 77, [&](std::size_t i) { return value(t, r, i + 5); });
    Tensor ra = Tensor::zeros(Shape{1001}, t), rb = Tensor::zeros(Shape{77}, t);
    // Receives posted in the other order than the sends: the host transport's tags pair them.
    parallel::Work r2 = g.recv(rb, prev, 2), r1 = g.recv(ra, prev, 1);
    parallel::Work s1 = g.send(a, next, 1), s2 = g.send(b, next, 2);
    // wait_on the CPU's stream is a host wait: it too sees the data.
    r1.wait_on(current_stream(Device::cpu()));
    parallel::wait_all({r2, s1, s2});
    EXPECT_EQ(mismatch(read(ra), [&](std::size_t i) { return value(t, prev, i); }), "");
    EXPECT_EQ(mismatch(read(rb), [&](std::size_t i) { return value(t, prev, i + 5); }), "");
  }
}

TEST(Staged, AFailedHostCallFailsTheWork) {
  const parallel::Group g = staged("staged_failure");
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor small = make(DType::f32, 3, [](std::size_t) { return 1.0; });
  Tensor big = Tensor::zeros(Shape{10}, DType::f32);
  parallel::Work rw = g.recv(big, prev, 7);
  g.send(small, next, 7).wait();
  try {
    rw.wait();
    ADD_FAILURE() << "a 3-element message completed a 10-element receive";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("recv #"));
  }
  EXPECT_TRUE(rw.is_completed());
  // The group goes on working.
  Tensor x = make(DType::f32, 5, [&](std::size_t) { return r + 1.0; });
  g.all_reduce(x).wait();
  EXPECT_EQ(read(x)[4], n * (n + 1) / 2.0);
}

TEST(Staged, ATimedOutReceiveNamesThePeerAndCompletesLater) {
  const auto& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const parallel::Group t = staged("staged_timeout");
  const parallel::Group side = w.split(0, w.rank(), "staged_side");
  Tensor x = Tensor::zeros(Shape{1}, DType::f64);
  if (t.rank() == 0) {
    t.set_timeout(std::chrono::seconds(1));
    parallel::Work rw = t.recv(x, 1, 3);
    try {
      rw.wait();
      ADD_FAILURE() << "received a message nobody sent";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("did not complete within 1000 ms: rank 1 has posted only 0 "
                                      "sends to this rank"));
    }
    side.barrier().wait();
    rw.wait(std::chrono::seconds(60));
    EXPECT_EQ(read(x)[0], 42.0);
  } else {
    side.barrier().wait();
    if (t.rank() == 1) {
      Tensor v = make(DType::f64, 1, [](std::size_t) { return 42.0; });
      t.send(v, 0, 3).wait();
    }
  }
}

TEST(Staged, ValidationNamesMismatchedCalls) {
  const auto& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const parallel::Group v = staged("staged_validated");
  v.set_validate(true);
  const std::int64_t n = v.rank() == 1 ? 12 : 10;
  Tensor buf = make(DType::f32, static_cast<std::size_t>(n), [](std::size_t) { return 1.0; });
  try {
    v.all_reduce(buf).wait();
    ADD_FAILURE() << "mismatched all_reduce counts were not detected";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the ranks are out of step"));
  }
  EXPECT_EQ(read(buf)[0], 1.0);  // the mismatched call never ran: nothing was copied back
  Tensor ok = make(DType::f32, 10, [](std::size_t) { return 1.0; });
  v.all_reduce(ok).wait();
  EXPECT_EQ(read(ok)[9], static_cast<double>(v.size()));
}

TEST(Staged, ManyCallsInFlightReuseTheStagingBuffers) {
  const parallel::Group g = staged("staged_in_flight");
  const int r = g.rank(), n = g.size();
  std::vector<Tensor> xs;
  std::vector<parallel::Work> ws;
  for (int round = 0; round < 3; ++round) {
    xs.clear();
    ws.clear();
    for (int k = 0; k < 40; ++k) {
      xs.push_back(make(DType::f32, 1000 + 17 * static_cast<std::size_t>(k),
                        [&](std::size_t i) { return value(DType::f32, r, i + k); }));
      ws.push_back(g.all_reduce(xs.back(), ReduceOp::sum));
    }
    // Waited newest first: each Work completes on its own.
    for (auto it = ws.rbegin(); it != ws.rend(); ++it) it->wait();
    for (int k = 0; k < 40; ++k)
      ASSERT_EQ(mismatch(read(xs[static_cast<std::size_t>(k)]),
                         [&](std::size_t i) { return reduced(DType::f32, ReduceOp::sum, n, i + k); }),
                "")
          << "round " << round << " call " << k;
  }
}

// NCCL's matching (testing::tags_ignored): the n-th send from a rank to another meets the n-th
// receive posted there from it, whatever the tags — so receives posted out of the sends' order get
// the wrong messages, and in order the right ones.
TEST(TagsIgnored, SendsAndReceivesPairByPostingOrder) {
  const auto& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const parallel::Group g =
      parallel::testing::tags_ignored(w.split(0, w.rank(), "tags_ignored"));
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> a(100, r * 10.0f + 1), b(100, r * 10.0f + 2), ra(100), rb(100);
  auto s1 = g.send(parallel::span(static_cast<const float*>(a.data()), a.size()), next, 1);
  auto s2 = g.send(parallel::span(static_cast<const float*>(b.data()), b.size()), next, 2);
  auto r2 = g.recv(parallel::span(rb.data(), rb.size()), prev, 2);  // out of order
  auto r1 = g.recv(parallel::span(ra.data(), ra.size()), prev, 1);
  parallel::wait_all({r2, r1, s1, s2});
  EXPECT_EQ(rb[0], prev * 10.0f + 1) << "the first receive posted got the first message sent";
  EXPECT_EQ(ra[0], prev * 10.0f + 2);
  auto s3 = g.send(parallel::span(static_cast<const float*>(a.data()), a.size()), next, 5);
  auto r3 = g.recv(parallel::span(ra.data(), ra.size()), prev, 5);
  parallel::wait_all({s3, r3});
  EXPECT_EQ(ra[0], prev * 10.0f + 1);
}

}  // namespace test_staged
}  // namespace
