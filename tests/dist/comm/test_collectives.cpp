// Every collective × every dtype × sizes 0, 1, 7 and a large odd size, against exact expected
// values; in-place and out-of-place forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <thread>

#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;
using parallel::ReduceOp;

namespace {

const std::vector<std::size_t> kSizes = {0, 1, 7, 1000003};
const std::vector<std::size_t> kBlockSizes = {0, 1, 7, 250001};  // per rank

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

}  // namespace

TEST(Collectives, AllReduceEveryDtypeOpAndSize) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  for (DType t : all_dtypes())
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (std::size_t count : kSizes) {
        SCOPED_TRACE(fmt::format("{} {} × {}", reduce_op_name(op), dtype_name(t), count));
        // In place.
        Tensor x = make(t, count, [&](std::size_t i) { return value(t, r, i); });
        g.all_reduce(x, op).wait();
        EXPECT_EQ(mismatch(read(x), [&](std::size_t i) { return reduced(t, op, n, i); }), "");
        // Out of place: the input is untouched.
        Tensor in = make(t, count, [&](std::size_t i) { return value(t, r, i); });
        Tensor out = Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t);
        g.all_reduce(in, out, op).wait();
        EXPECT_EQ(mismatch(read(out), [&](std::size_t i) { return reduced(t, op, n, i); }), "");
        EXPECT_EQ(mismatch(read(in), [&](std::size_t i) { return value(t, r, i); }), "");
      }
}

TEST(Collectives, ReduceScatterEveryDtypeOpAndSize) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  for (DType t : all_dtypes())
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (std::size_t block : kBlockSizes) {
        SCOPED_TRACE(fmt::format("{} {} × {} per rank", reduce_op_name(op), dtype_name(t), block));
        const std::size_t total = block * static_cast<std::size_t>(n);
        Tensor in = make(t, total, [&](std::size_t i) { return value(t, r, i); });
        Tensor out = Tensor::zeros(Shape{static_cast<std::int64_t>(block)}, t);
        g.reduce_scatter(in, out, op).wait();
        const std::size_t base = block * static_cast<std::size_t>(r);
        EXPECT_EQ(mismatch(read(out), [&](std::size_t i) { return reduced(t, op, n, base + i); }),
                  "");
      }
}

TEST(Collectives, ReduceScatterIntoOwnBlockOfTheInput) {
  // ZeRO's form: each rank keeps its reduced shard in place inside the flat buffer.
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  for (DType t : {DType::f32, DType::bf16, DType::i32}) {
    const std::size_t block = 1001;
    Tensor flat = make(t, block * n, [&](std::size_t i) { return value(t, r, i); });
    Tensor mine = flat.slice(0, static_cast<std::int64_t>(block) * r,
                             static_cast<std::int64_t>(block) * (r + 1));
    g.reduce_scatter(flat, mine, ReduceOp::sum).wait();
    const std::size_t base = block * static_cast<std::size_t>(r);
    EXPECT_EQ(
        mismatch(read(mine), [&](std::size_t i) { return reduced(t, ReduceOp::sum, n, base + i); }),
        "")
        << dtype_name(t);
  }
}

TEST(Collectives, AllGatherEveryDtypeAndSize) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  for (DType t : all_dtypes())
    for (std::size_t block : kBlockSizes) {
      SCOPED_TRACE(fmt::format("{} × {} per rank", dtype_name(t), block));
      const std::size_t total = block * static_cast<std::size_t>(n);
      auto want = [&](std::size_t i) {
        return value(t, static_cast<int>(i / std::max<std::size_t>(block, 1)),
                     i % std::max<std::size_t>(block, 1) + 5);
      };
      Tensor in = make(t, block, [&](std::size_t i) { return value(t, r, i + 5); });
      Tensor out = Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t);
      g.all_gather(in, out).wait();
      EXPECT_EQ(mismatch(read(out), want), "");
      // In place: the input is this rank's block of the output.
      Tensor flat = Tensor::zeros(Shape{static_cast<std::int64_t>(total)}, t);
      Tensor own = flat.slice(0, static_cast<std::int64_t>(block) * r,
                              static_cast<std::int64_t>(block) * (r + 1));
      own.copy_from(in);
      g.all_gather(own, flat).wait();
      EXPECT_EQ(mismatch(read(flat), want), "");
    }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  for (DType t : all_dtypes())
    for (std::size_t count : kSizes)
      for (int root = 0; root < n; ++root) {
        SCOPED_TRACE(fmt::format("{} × {} from root {}", dtype_name(t), count, root));
        Tensor x = make(t, count, [&](std::size_t i) { return value(t, r, i); });
        g.broadcast(x, root).wait();
        EXPECT_EQ(mismatch(read(x), [&](std::size_t i) { return value(t, root, i); }), "");
      }
}

TEST(Collectives, Bf16SumsRoundToNearestEvenAtEachStep) {
  // 256 + 1 is not representable in bf16 (8 bits of mantissa): with two ranks contributing 256
  // and 1 the sum rounds to 256 (ties to even), never to garbage from adding raw bit patterns.
  const auto& g = world();
  if (g.size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  Tensor x = make(DType::bf16, 3, [&](std::size_t i) {
    return g.rank() == 0 ? (i == 0   ? 256.0
                            : i == 1 ? 1.5
                                     : -2.0)
                         : (i == 0   ? 1.0
                            : i == 1 ? 0.25
                                     : 0.5);
  });
  g.all_reduce(x).wait();
  EXPECT_EQ(read(x), (std::vector<double>{256.0, 1.75, -1.5}));
}

TEST(Collectives, SpansOfRawMemory) {
  const auto& g = world();
  const int n = g.size();
  std::vector<std::int64_t> v(5, g.rank() + 1);
  g.all_reduce(parallel::span(v.data(), v.size()), parallel::span(v.data(), v.size())).wait();
  for (auto x : v) EXPECT_EQ(x, static_cast<std::int64_t>(n) * (n + 1) / 2);
  std::vector<float> gathered(static_cast<std::size_t>(n) * 2);
  const float mine[2] = {static_cast<float>(g.rank()), -static_cast<float>(g.rank())};
  g.all_gather(parallel::span(mine, 2), parallel::span(gathered.data(), gathered.size())).wait();
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(gathered[2 * q], q);
    EXPECT_EQ(gathered[2 * q + 1], -q);
  }
}

TEST(Collectives, ValuesReduceElementwiseOnEveryRankWithTheGivenWait) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  EXPECT_EQ(g.all_reduce_value(0.5 * (r + 1), ReduceOp::sum), 0.25 * n * (n + 1));
  EXPECT_EQ(g.all_reduce_value<std::int32_t>(r == n - 1 ? 7 : r, ReduceOp::max), std::max(7, n - 2));
  EXPECT_EQ(g.all_reduce_value(static_cast<double>(r), ReduceOp::avg), (n - 1) / 2.0);
  // Two flags at once: each is the max over ranks of its own column.
  const auto f = g.all_reduce_values(std::array<std::int32_t, 2>{r == 0 ? 1 : 0, 0}, ReduceOp::max);
  EXPECT_EQ(f, (std::array<std::int32_t, 2>{1, 0}));
  // A caller's own wait is used (and the result is there once it returns).
  int waits = 0;
  const std::int64_t s = g.all_reduce_value<std::int64_t>(r + 1, ReduceOp::sum, [&](const parallel::Work& w) {
    ++waits;
    while (!w.is_completed()) std::this_thread::yield();
    w.wait();
  });
  EXPECT_EQ(s, static_cast<std::int64_t>(n) * (n + 1) / 2);
  EXPECT_EQ(waits, n > 1 ? 1 : 0);  // a group of one does not communicate
}

TEST(Collectives, ManyInFlightAtOnceCompleteInAnyWaitOrder) {
  const auto& g = world();
  const int n = g.size();
  std::vector<Tensor> xs;
  std::vector<parallel::Work> ws;
  for (int k = 0; k < 16; ++k) {
    xs.push_back(make(DType::f32, 1000 + k, [&](std::size_t) { return k + g.rank(); }));
    ws.push_back(g.all_reduce(xs.back()));
  }
  for (int k = 15; k >= 0; --k) {
    ws[k].wait();
    const double want = static_cast<double>(k) * n + n * (n - 1) / 2.0;
    EXPECT_EQ(mismatch(read(xs[k]), [&](std::size_t) { return want; }), "") << k;
  }
}

TEST(Collectives, MismatchedArgumentsAreRejectedBeforeAnythingIsSent) {
  const auto& g = world();
  const std::uint64_t before = g.sequence();
  Tensor a = Tensor::zeros(Shape{4}, DType::f32), b = Tensor::zeros(Shape{5}, DType::f32);
  Tensor c = Tensor::zeros(Shape{4}, DType::i32);
  EXPECT_THROW(g.all_reduce(a, b), Error);
  EXPECT_THROW(g.all_reduce(a, c), Error);
  EXPECT_THROW(g.reduce_scatter(Tensor::zeros(Shape{4 * g.size() + 1}, DType::f32), a), Error);
  EXPECT_THROW(g.all_gather(a, Tensor::zeros(Shape{4 * g.size() + 1}, DType::f32)), Error);
  EXPECT_THROW(g.broadcast(a, g.size()), Error);
  EXPECT_THROW(g.all_reduce(Tensor::zeros(Shape{3, 4}, DType::f32).transpose(0, 1)), Error);
  EXPECT_EQ(g.sequence(), before);  // nothing was numbered, so the ranks stay in step
}
