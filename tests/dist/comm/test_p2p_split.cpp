// send/recv around a ring (every dtype family, every size, out-of-order tags), split() into
// subgroups with collectives inside them, barriers and sequence numbers.
#include <gtest/gtest.h>

#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;
using parallel::ReduceOp;

TEST(PointToPoint, RingEverySize) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DType t : {DType::f32, DType::bf16, DType::i64, DType::u8})
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000003}}) {
      SCOPED_TRACE(fmt::format("{} × {}", dtype_name(t), count));
      Tensor out = make(t, count, [&](std::size_t i) { return value(t, r, i); });
      Tensor in = Tensor::zeros(Shape{static_cast<std::int64_t>(count)}, t);
      // Receive first, then send: both in flight before either is waited on.
      parallel::Work rw = g.recv(in, prev);
      parallel::Work sw = g.send(out, next);
      sw.wait();
      rw.wait();
      EXPECT_EQ(mismatch(read(in), [&](std::size_t i) { return value(t, prev, i); }), "");
    }
}

TEST(PointToPoint, TagsMatchOutOfOrder) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> a(100, r * 10.0f + 1), b(100, r * 10.0f + 2), ra(100), rb(100);
  auto s1 = g.send(parallel::span(static_cast<const float*>(a.data()), a.size()), next, 1);
  auto s2 = g.send(parallel::span(static_cast<const float*>(b.data()), b.size()), next, 2);
  auto r2 = g.recv(parallel::span(rb.data(), rb.size()), prev, 2);
  auto r1 = g.recv(parallel::span(ra.data(), ra.size()), prev, 1);
  parallel::wait_all({r2, r1, s1, s2});
  EXPECT_EQ(ra[0], prev * 10.0f + 1);
  EXPECT_EQ(rb[99], prev * 10.0f + 2);
}

TEST(PointToPoint, ShorterMessageThanPostedReceiveIsAnError) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> small(3, 1.0f), big(10);
  auto rw = g.recv(parallel::span(big.data(), big.size()), prev, 7);
  auto sw = g.send(parallel::span(static_cast<const float*>(small.data()), small.size()), next, 7);
  sw.wait();
  try {
    rw.wait();
    ADD_FAILURE() << "a 3-element message completed a 10-element receive";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recv #"), std::string::npos) << e.what();
  }
}

TEST(Split, EvenAndOddRanksWithCollectivesInside) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  parallel::Group sub = g.split(r % 2, r);
  EXPECT_EQ(sub.name(), fmt::format("world.{}", r % 2));
  std::vector<int> members;
  for (int q = r % 2; q < n; q += 2) members.push_back(q);
  EXPECT_EQ(sub.world_ranks(), members);
  EXPECT_EQ(sub.size(), static_cast<int>(members.size()));
  EXPECT_EQ(sub.rank(), r / 2);
  // A collective inside each half, and one on the world at the same time.
  Tensor x = make(DType::i32, 11, [&](std::size_t) { return r; });
  Tensor y = make(DType::f32, 5, [&](std::size_t) { return 1.0; });
  auto ws = sub.all_reduce(x);
  auto ww = g.all_reduce(y);
  ws.wait();
  ww.wait();
  int want = 0;
  for (int m : members) want += m;
  EXPECT_EQ(mismatch(read(x), [&](std::size_t) { return want; }), "");
  EXPECT_EQ(mismatch(read(y), [&](std::size_t) { return n; }), "");
  // Gather the world ranks inside the subgroup: ordered by subgroup rank.
  Tensor mine = make(DType::i32, 1, [&](std::size_t) { return r; });
  Tensor all = Tensor::zeros(Shape{sub.size()}, DType::i32);
  sub.all_gather(mine, all).wait();
  EXPECT_EQ(mismatch(read(all), [&](std::size_t i) { return members[i]; }), "");
}

TEST(Split, KeyOrdersTheRanksAndSplitsNest) {
  const auto& g = world();
  const int r = g.rank(), n = g.size();
  parallel::Group rev = g.split(0, -r, "reversed");
  EXPECT_EQ(rev.name(), "reversed");
  EXPECT_EQ(rev.rank(), n - 1 - r);
  EXPECT_EQ(rev.world_ranks()[0], n - 1);
  parallel::Group single = rev.split(rev.rank(), 0);
  EXPECT_EQ(single.size(), 1);
  EXPECT_EQ(single.world_ranks(), std::vector<int>{r});
  Tensor x = make(DType::f32, 3, [&](std::size_t) { return 2.5; });
  single.all_reduce(x, ReduceOp::avg).wait();
  EXPECT_EQ(read(x), (std::vector<double>{2.5, 2.5, 2.5}));
  // Root 0 of the reversed group is world rank n-1.
  Tensor b = make(DType::i32, 4, [&](std::size_t) { return r; });
  rev.broadcast(b, 0).wait();
  EXPECT_EQ(mismatch(read(b), [&](std::size_t) { return n - 1; }), "");
}

TEST(Split, ColorMustBeNonNegative) {
  EXPECT_THROW(world().split(-1, 0), UserError);
}

TEST(Sequence, EveryCollectiveIsNumberedSendsAreNot) {
  const auto& g = world();
  parallel::Group s = g.split(0, g.rank(), "seq");
  EXPECT_EQ(s.sequence(), 0u);
  s.barrier().wait();
  std::int32_t v = 1;
  auto w = s.all_reduce(parallel::span(&v, 1), parallel::span(&v, 1));
  ASSERT_NE(w.op(), nullptr);
  EXPECT_EQ(w.op()->seq, 2u);
  EXPECT_EQ(w.op()->str(), "all_reduce #2 (i32 × 1, sum)");
  w.wait();
  const int next = (s.rank() + 1) % s.size(), prev = (s.rank() + s.size() - 1) % s.size();
  std::int32_t in = 0;
  auto rw = s.recv(parallel::span(&in, 1), prev);
  auto sw = s.send(parallel::span(static_cast<const std::int32_t*>(&v), 1), next);
  EXPECT_EQ(sw.op()->seq, 1u);  // the first send to that peer
  parallel::wait_all({sw, rw});
  EXPECT_EQ(s.sequence(), 2u);
  EXPECT_EQ(v, s.size());
}
