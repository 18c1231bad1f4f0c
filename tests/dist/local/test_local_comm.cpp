// The local transport (a program run without a launcher: one rank) and the pieces of
// initialisation that decide between transports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "framework/core/half.hpp"
#include "parallel/comm/host_reduce.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/comm/launch.hpp"

using namespace strata;
using namespace strata::parallel;
using ::testing::HasSubstr;

namespace {

Group local_world() {
  InitOptions o;
  o.timeout = std::chrono::milliseconds(300);
  return init_world(o);
}

Tensor iota(DType t, std::int64_t n, double start = 1) {
  Tensor x = Tensor::empty(Shape{n}, t);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = start + static_cast<double>(i);
  if (n)
    x.copy_from(
        Tensor(Storage::wrap(v.data(), v.size() * 8, Device::cpu()), DType::f64, Shape{n}, {1}));
  return x;
}

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* k) -> const char* {
    auto it = shared->find(k);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST(LocalComm, WithoutALauncherTheWorldIsOneLocalRank) {
  Group g = local_world();
  EXPECT_EQ(g.transport(), "local");
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(g.describe(), "group 'world' (size 1, world ranks [0])");
  EXPECT_EQ(init_world().describe(), g.describe());  // later calls return the same world
}

TEST(LocalComm, CollectivesAreIdentityCopies) {
  Group g = local_world();
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i8, DType::u32, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      Tensor in = iota(t, 9, -4);
      Tensor out = Tensor::zeros(Shape{9}, t);
      g.all_reduce(in, out, op).wait();
      EXPECT_EQ(out.to_vector(), in.to_vector()) << dtype_name(t);
      g.all_reduce(in, op).wait();  // in place: unchanged
      EXPECT_EQ(in.to_vector(), iota(t, 9, -4).to_vector());
      Tensor rs = Tensor::zeros(Shape{9}, t);
      g.reduce_scatter(in, rs, op).wait();
      EXPECT_EQ(rs.to_vector(), in.to_vector());
    }
    Tensor in = iota(t, 5), out = Tensor::zeros(Shape{5}, t);
    g.all_gather(in, out).wait();
    EXPECT_EQ(out.to_vector(), in.to_vector());
    g.broadcast(in, 0).wait();
    EXPECT_EQ(in.to_vector(), iota(t, 5).to_vector());
  }
  g.barrier().wait();
  EXPECT_EQ(g.sequence(), 6u * (3 * 3 + 2) + 1);
}

TEST(LocalComm, SendToSelfMatchesByTagInEitherOrder) {
  Group g = local_world();
  Tensor a = iota(DType::f32, 4, 10), b = iota(DType::f32, 4, 20);
  Tensor ra = Tensor::zeros(Shape{4}, DType::f32), rb = Tensor::zeros(Shape{4}, DType::f32);
  Work wb = g.recv(rb, 0, 2);  // receive posted before its send
  Work sa = g.send(a, 0, 1);   // send posted before its receive
  EXPECT_FALSE(wb.is_completed());
  Work sb = g.send(b, 0, 2);
  Work wa = g.recv(ra, 0, 1);
  wait_all({wa, wb, sa, sb});
  EXPECT_EQ(ra.to_vector(), a.to_vector());
  EXPECT_EQ(rb.to_vector(), b.to_vector());
}

TEST(LocalComm, AnUnmatchedReceiveTimesOutWithAnExplanation) {
  Group g = local_world();
  Tensor r = Tensor::zeros(Shape{3}, DType::i32);
  Work w = g.recv(r, 0, 9);
  try {
    w.wait(std::chrono::milliseconds(50));
    FAIL() << "an unmatched receive completed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[comm] recv #"));
    EXPECT_THAT(e.what(), HasSubstr("(i32 × 3, tag 9) on group 'world' (size 1, world ranks [0]) "
                                    "did not complete within 50 ms: no send to this rank with "
                                    "that tag was posted"));
  }
  Tensor s = iota(DType::i32, 3);
  g.send(s, 0, 9).wait();  // matches the receive that timed out
  w.wait();
  EXPECT_EQ(r.to_vector(), s.to_vector());
}

TEST(LocalComm, SplitGivesANamedOneRankGroup) {
  Group g = local_world();
  Group s = g.split(3, 0);
  EXPECT_EQ(s.name(), "world.3");
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s.timeout(), g.timeout());
  EXPECT_THROW(g.split(-1, 0), UserError);
}

TEST(LocalComm, AnEmptyGroupSaysWhereGroupsComeFrom) {
  Group none;
  EXPECT_FALSE(none.valid());
  try {
    none.barrier();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("init_world()"));
  }
}

TEST(Init, StrictRefusesToRunWithoutALauncher) {
  finalize_world();  // the local world can be started again; MPI could not
  InitOptions o;
  o.strict = true;
  try {
    init_world(o);
    FAIL() << "strict init formed a 1-rank world without a launcher";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not started by a launcher"));
  }
  InitOptions want4;
  want4.expected_size = 4;
  EXPECT_THROW(init_world(want4), Error);
  EXPECT_EQ(local_world().size(), 1);
}

TEST(Init, LocalTransportIsRefusedInsideALaunchedJob) {
  finalize_world();
  ::setenv("PMI_SIZE", "2", 1);
  InitOptions o;
  o.transport = "local";
  try {
    init_world(o);
    ADD_FAILURE() << "a launched 2-rank job was allowed to run as one local rank";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("PMI_SIZE=2"));
  }
  ::unsetenv("PMI_SIZE");
  EXPECT_EQ(local_world().transport(), "local");
}

TEST(Launch, DetectsLaunchersAndTheirSizes) {
  EXPECT_FALSE(detect_launch(fake_env({})).under_launcher);
  auto ompi = detect_launch(fake_env({{"OMPI_COMM_WORLD_SIZE", "4"}, {"PMIX_RANK", "1"}}));
  EXPECT_TRUE(ompi.under_launcher);
  EXPECT_EQ(ompi.size, 4);
  EXPECT_EQ(ompi.evidence, "OMPI_COMM_WORLD_SIZE=4");
  auto pmix = detect_launch(fake_env({{"PMIX_RANK", "0"}}));
  EXPECT_TRUE(pmix.under_launcher);
  EXPECT_FALSE(pmix.size.has_value());
  EXPECT_THROW(detect_launch(fake_env({{"PMI_SIZE", "two"}})), UserError);
  EXPECT_THROW(detect_launch(fake_env({{"PMI_SIZE", "2"}, {"STRATA_WORLD_SIZE", "3"}})), UserError);
}

TEST(Launch, AWorldSmallerThanLaunchedIsRefused) {
  auto l = detect_launch(fake_env({{"OMPI_COMM_WORLD_SIZE", "8"}}));
  EXPECT_NO_THROW(check_world_size(l, std::nullopt, 8));
  try {
    check_world_size(l, std::nullopt, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("launched on 8 ranks (OMPI_COMM_WORLD_SIZE=8) but MPI formed "
                                    "a world of 1"));
  }
  EXPECT_THROW(check_world_size(detect_launch(fake_env({})), 2, 1), Error);
}

TEST(HostReduce, HalfPrecisionSumsRoundToNearestEven) {
  // bf16 has 8 significant bits: 256 + 1 = 257 is a tie between 256 and 258 → 256 (even);
  // 256 + 3 = 259 → 260.
  std::uint16_t a[3] = {f32_to_bf16(256.f), f32_to_bf16(256.f), f32_to_bf16(-1.5f)};
  std::uint16_t b[3] = {f32_to_bf16(1.f), f32_to_bf16(3.f), f32_to_bf16(0.25f)};
  host_reduce(a, b, 3, DType::bf16, ReduceOp::sum);
  EXPECT_EQ(bf16_to_f32(b[0]), 256.f);
  EXPECT_EQ(bf16_to_f32(b[1]), 260.f);
  EXPECT_EQ(bf16_to_f32(b[2]), -1.25f);
  // f16 has 11: 2048 + 1 → 2048, 2048 + 3 → 2052.
  std::uint16_t c[2] = {f32_to_f16(2048.f), f32_to_f16(2048.f)};
  std::uint16_t d[2] = {f32_to_f16(1.f), f32_to_f16(3.f)};
  host_reduce(c, d, 2, DType::f16, ReduceOp::sum);
  EXPECT_EQ(f16_to_f32(d[0]), 2048.f);
  EXPECT_EQ(f16_to_f32(d[1]), 2052.f);
  host_reduce(c, d, 2, DType::f16, ReduceOp::max);
  EXPECT_EQ(f16_to_f32(d[1]), 2052.f);
  EXPECT_EQ(f16_to_f32(d[0]), 2048.f);
}

TEST(HostReduce, AvgDivisionTruncatesIntegersTowardZero) {
  std::int32_t i[4] = {-7, 7, 6, -1};
  host_divide(i, 4, DType::i32, 2);
  EXPECT_EQ(i[0], -3);
  EXPECT_EQ(i[1], 3);
  EXPECT_EQ(i[2], 3);
  EXPECT_EQ(i[3], 0);
  std::uint8_t u[2] = {255, 7};
  host_divide(u, 2, DType::u8, 300);  // divisors beyond the type's range do not wrap
  EXPECT_EQ(u[0], 0);
  std::uint16_t h[1] = {f32_to_bf16(1.0f)};
  host_divide(h, 1, DType::bf16, 3);
  EXPECT_EQ(bf16_to_f32(h[0]), bf16_to_f32(f32_to_bf16(1.0f / 3.0f)));
}
