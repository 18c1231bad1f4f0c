// Failure modes: a rank that never joins a collective (or never sends) makes the others fail
// with a timeout error naming it; validation mode names ranks that posted a different call;
// device buffers without a usable NCCL give a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework/backend/cuda_runtime.hpp"
#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(Timeout, MissingRankIsNamedAndTheCallCompletesWhenItJoins) {
  const auto& g = world();
  if (g.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  parallel::Group t = g.split(0, g.rank(), "timeout_test");
  parallel::Group side = g.split(0, g.rank(), "side");
  const int skipper = g.size() - 1;
  float x = 1.0f;
  if (g.rank() != skipper) {
    t.set_timeout(std::chrono::seconds(2));  // the late rank keeps the generous default
    parallel::Work w = t.all_reduce(parallel::span(&x, 1), parallel::span(&x, 1));
    try {
      w.wait();
      ADD_FAILURE() << "the all_reduce completed although rank " << skipper << " never joined";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_THAT(m, HasSubstr("[comm] all_reduce #1 (f32 × 1, sum) on group 'timeout_test' "
                               "(size " +
                               std::to_string(g.size())));
      EXPECT_THAT(m, HasSubstr("did not complete within 2000 ms"));
      EXPECT_THAT(m, HasSubstr(fmt::format("had not arrived: rank {} (it has posted no collective "
                                           "on this group)",
                                           skipper)));
      std::vector<int> arrived;
      for (int q = 0; q < skipper; ++q) arrived.push_back(q);
      EXPECT_THAT(m, HasSubstr(fmt::format("arrived: {} {}", arrived.size() == 1 ? "rank" : "ranks",
                                           fmt::join(arrived, ", "))));
      EXPECT_THAT(m, Not(HasSubstr("did not answer")));
    }
    EXPECT_FALSE(w.is_completed());
    side.barrier().wait();  // now the skipper joins
    w.wait(std::chrono::seconds(60));
  } else {
    side.barrier().wait();
    t.all_reduce(parallel::span(&x, 1), parallel::span(&x, 1)).wait();
  }
  EXPECT_EQ(x, static_cast<float>(g.size()));
}

TEST(Timeout, ARankBehindIsReportedWithItsLastCollective) {
  const auto& g = world();
  if (g.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  parallel::Group t = g.split(0, g.rank(), "behind");
  parallel::Group side = g.split(0, g.rank(), "side2");
  std::int32_t v[4] = {1, 1, 1, 1};
  std::int32_t gathered[64] = {};
  t.barrier().wait();  // #1 everywhere
  t.all_gather(parallel::span(static_cast<const std::int32_t*>(v), 1),
               parallel::span(gathered, static_cast<std::size_t>(g.size())))
      .wait();  // #2 everywhere
  if (g.rank() == 0) {
    t.set_timeout(std::chrono::milliseconds(1500));  // only for the call expected to time out
    parallel::Work w = t.all_reduce(parallel::span(v, 4), parallel::span(v, 4));  // #3
    try {
      w.wait();
      ADD_FAILURE() << "completed without the other ranks";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_THAT(m, HasSubstr("all_reduce #3 (i32 × 4, sum)"));
      EXPECT_THAT(m, HasSubstr("had not arrived: rank 1 (it has posted 2 collectives on this "
                               "group, the last all_gather #2 (i32 × 1))"));
    }
    side.barrier().wait();
    w.wait(std::chrono::seconds(60));
  } else {
    side.barrier().wait();
    t.all_reduce(parallel::span(v, 4), parallel::span(v, 4)).wait();
  }
  EXPECT_EQ(v[3], g.size());
}

TEST(Timeout, ReceiveWithoutASendNamesThePeer) {
  const auto& g = world();
  if (g.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  parallel::Group t = g.split(0, g.rank(), "p2p_timeout");
  parallel::Group side = g.split(0, g.rank(), "side3");
  double x = 0;
  if (t.rank() == 0) {
    t.set_timeout(std::chrono::seconds(1));
    parallel::Work w = t.recv(parallel::span(&x, 1), 1, 3);
    try {
      w.wait();
      ADD_FAILURE() << "received a message nobody sent";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("recv #1 from rank 1 (f64 × 1, tag 3) on group "
                                      "'p2p_timeout'"));
      EXPECT_THAT(e.what(), HasSubstr("did not complete within 1000 ms: rank 1 has posted only 0 "
                                      "sends to this rank (this is receive #1 from it)"));
    }
    side.barrier().wait();
    w.wait(std::chrono::seconds(60));
    EXPECT_EQ(x, 42.0);
  } else {
    side.barrier().wait();
    if (t.rank() == 1) {
      const double v = 42.0;
      t.send(parallel::span(&v, 1), 0, 3).wait();
    }
  }
}

TEST(Validation, RanksPostingDifferentCollectivesAreNamedOnEveryRank) {
  const auto& g = world();
  if (g.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  parallel::Group v = g.split(0, g.rank(), "validated");
  v.set_validate(true);
  std::vector<float> buf(12, 1.0f);
  const std::size_t n = v.rank() == 1 ? 12 : 10;
  parallel::Work w = v.all_reduce(parallel::span(buf.data(), n), parallel::span(buf.data(), n));
  try {
    w.wait();
    ADD_FAILURE() << "mismatched all_reduce counts were not detected";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("the ranks are out of step"));
    if (v.rank() == 1)
      EXPECT_THAT(m, HasSubstr("rank 0 posted all_reduce #1 (f32 × 10, sum)"));
    else
      EXPECT_THAT(m, HasSubstr("rank 1 posted all_reduce #1 (f32 × 12, sum)"));
  }
  EXPECT_EQ(buf[0], 1.0f);  // the mismatched call never ran
  // The group stays usable: matching calls go through and are checked.
  v.all_reduce(parallel::span(buf.data(), 10), parallel::span(buf.data(), 10)).wait();
  EXPECT_EQ(buf[0], static_cast<float>(v.size()));
  Tensor x =
      make(DType::bf16, 1001, [&](std::size_t i) { return value(DType::bf16, v.rank(), i); });
  Tensor out = Tensor::zeros(Shape{1001 * v.size()}, DType::bf16);
  v.all_gather(x, out).wait();
  EXPECT_EQ(mismatch(read(out),
                     [&](std::size_t i) {
                       return value(DType::bf16, static_cast<int>(i / 1001), i % 1001);
                     }),
            "");
  v.barrier().wait();
}

TEST(Devices, CudaBuffersWithoutAUsableNcclAreAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible: NCCL would be used";
  const auto& g = world();
  const std::uint64_t before = g.sequence();
  float dummy[4] = {};
  parallel::Span dev{dummy, 4, DType::f32, Device::cuda(0), Tier::device};
  try {
    g.all_reduce(parallel::ConstSpan(dev), dev).wait();
    ADD_FAILURE() << "a cuda buffer was accepted without NCCL";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("device buffers need the NCCL transport"));
  }
  EXPECT_EQ(g.sequence(), before);
}
