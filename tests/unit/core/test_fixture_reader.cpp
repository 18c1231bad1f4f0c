// Tests for the fixture reader (tests/support/fixture.hpp) and the structure of the committed GPT
// reference fixture tests/fixtures/gpt_tiny.fx (made by tools/pytorch/make_gpt_fixtures.py).
#include "tests/support/fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using strata::test::Fixture;
using strata::test::FixtureDType;
using strata::test::FixtureWriter;
using Shape = std::vector<std::uint64_t>;

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + "strata_fixture_" + stem + ".fx";
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no exception>";
}

// Appends little-endian bytes of v.
template <class T>
void put(std::vector<unsigned char>& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

// A file built byte by byte from the documented format, independent of FixtureWriter.
std::vector<unsigned char> hand_written_file() {
  std::vector<unsigned char> b{'S', 'T', 'R', 'A', 'T', 'A', 'F', 'X'};
  put<std::uint32_t>(b, 1);
  put<std::uint32_t>(b, 3);
  // "w": f32 [2,3]
  put<std::uint32_t>(b, 1);
  b.push_back('w');
  put<std::uint32_t>(b, 0);
  put<std::uint32_t>(b, 2);
  put<std::uint64_t>(b, 2);
  put<std::uint64_t>(b, 3);
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, -6.5f}) put<float>(b, v);
  // "ids": i32 [2]
  put<std::uint32_t>(b, 3);
  b.insert(b.end(), {'i', 'd', 's'});
  put<std::uint32_t>(b, 1);
  put<std::uint32_t>(b, 1);
  put<std::uint64_t>(b, 2);
  put<std::int32_t>(b, -1);
  put<std::int32_t>(b, 7);
  // "lr": f64 scalar (rank 0)
  put<std::uint32_t>(b, 2);
  b.insert(b.end(), {'l', 'r'});
  put<std::uint32_t>(b, 2);
  put<std::uint32_t>(b, 0);
  put<double>(b, 1e-3);
  return b;
}

TEST(FixtureReader, ParsesHandWrittenBytes) {
  const auto fx = Fixture::parse(hand_written_file(), "mem");
  EXPECT_EQ(fx.names(), (std::vector<std::string>{"w", "ids", "lr"}));
  EXPECT_EQ(fx.shape("w"), (Shape{2, 3}));
  EXPECT_EQ(fx.dtype("w"), FixtureDType::F32);
  EXPECT_EQ(fx.f32("w"), (std::vector<float>{1, 2, 3, 4, 5, -6.5f}));
  EXPECT_EQ(fx.i32("ids"), (std::vector<std::int32_t>{-1, 7}));
  EXPECT_TRUE(fx.shape("lr").empty());
  EXPECT_DOUBLE_EQ(fx.scalar("lr"), 1e-3);
  EXPECT_TRUE(fx.has("ids"));
  EXPECT_FALSE(fx.has("id"));
}

TEST(FixtureReader, WriterRoundTripThroughFile) {
  FixtureWriter w;
  w.add_f32("a/b.weight", {3, 1, 2}, {0.5f, -1.f, 2.f, 3.25f, 1e-20f, -0.f});
  w.add_i32("idx", {2, 2}, {0, 1, -1, 2147483647});
  w.add_f64("loss", {}, {4.125});
  w.add_f32("empty", {0, 4}, {});
  const auto path = temp_path("roundtrip");
  w.save(path);
  const auto fx = Fixture::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(fx.path(), path);
  EXPECT_EQ(fx.names(), (std::vector<std::string>{"a/b.weight", "idx", "loss", "empty"}));
  EXPECT_EQ(fx.shape("a/b.weight"), (Shape{3, 1, 2}));
  EXPECT_EQ(fx.f32("a/b.weight"), (std::vector<float>{0.5f, -1.f, 2.f, 3.25f, 1e-20f, -0.f}));
  EXPECT_EQ(fx.i32("idx"), (std::vector<std::int32_t>{0, 1, -1, 2147483647}));
  EXPECT_EQ(fx.scalar("loss"), 4.125);
  EXPECT_EQ(fx.numel("empty"), 0u);
  EXPECT_EQ(fx.shape("empty"), (Shape{0, 4}));
  // The writer emits exactly the documented bytes.
  FixtureWriter w2;
  w2.add_f32("w", {2, 3}, {1, 2, 3, 4, 5, -6.5f});
  w2.add_i32("ids", {2}, {-1, 7});
  w2.add_f64("lr", {}, {1e-3});
  EXPECT_EQ(w2.bytes(), hand_written_file());
}

TEST(FixtureReader, ErrorsNameFileAndEntry) {
  const auto fx = Fixture::parse(hand_written_file(), "some/file.fx");
  auto msg = error_of([&] { fx.f32("nope"); });
  EXPECT_NE(msg.find("some/file.fx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'nope'"), std::string::npos) << msg;
  msg = error_of([&] { fx.f32("ids"); });  // wrong dtype: no silent conversion
  EXPECT_NE(msg.find("'ids'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("i32"), std::string::npos) << msg;
  msg = error_of([&] { fx.scalar("w"); });
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  msg = error_of([&] { Fixture::load("/nonexistent/dir/x.fx"); });
  EXPECT_NE(msg.find("/nonexistent/dir/x.fx"), std::string::npos) << msg;
}

TEST(FixtureReader, RejectsMalformedFiles) {
  const auto good = hand_written_file();
  auto bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_NE(error_of([&] { Fixture::parse(bad_magic, "f"); }).find("magic"), std::string::npos);

  auto bad_version = good;
  bad_version[8] = 2;
  EXPECT_NE(error_of([&] { Fixture::parse(bad_version, "f"); }).find("version"), std::string::npos);

  for (std::size_t cut : {std::size_t{12}, std::size_t{30}, good.size() - 1}) {
    std::vector<unsigned char> truncated(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_NE(error_of([&] { Fixture::parse(truncated, "f"); }).find("truncated"), std::string::npos) << cut;
  }

  auto trailing = good;
  trailing.push_back(0);
  EXPECT_NE(error_of([&] { Fixture::parse(trailing, "f"); }).find("trailing"), std::string::npos);

  auto bad_dtype = good;
  bad_dtype[16 + 4 + 1] = 9;  // dtype of the first entry "w"
  const auto msg = error_of([&] { Fixture::parse(bad_dtype, "f"); });
  EXPECT_NE(msg.find("dtype"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;

  auto huge = good;  // first dim of "w" set to 2^62: must be rejected, not allocated
  const std::uint64_t big = std::uint64_t{1} << 62;
  std::memcpy(huge.data() + 16 + 4 + 1 + 8, &big, 8);
  EXPECT_NE(error_of([&] { Fixture::parse(huge, "f"); }), "<no exception>");

  FixtureWriter w;
  w.add_f32("x", {1}, {1.f});
  EXPECT_THROW(w.add_f32("x", {1}, {2.f}), std::runtime_error);
  EXPECT_THROW(w.add_f32("y", {2, 2}, {1.f}), std::runtime_error);
}

// ---- the committed GPT reference fixture -------------------------------------------------------

const std::string kGptTiny = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/gpt_tiny.fx";

// nanoGPT parameter names and shapes (nn.Linear is [out, in]) in named_parameters() order.
std::vector<std::pair<std::string, Shape>> gpt_params(std::uint64_t V, std::uint64_t Tmax, std::uint64_t L,
                                                      std::uint64_t C) {
  std::vector<std::pair<std::string, Shape>> p{{"transformer.wte.weight", {V, C}},
                                               {"transformer.wpe.weight", {Tmax, C}}};
  for (std::uint64_t l = 0; l < L; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    p.push_back({h + "ln_1.weight", {C}});
    p.push_back({h + "ln_1.bias", {C}});
    p.push_back({h + "attn.c_attn.weight", {3 * C, C}});
    p.push_back({h + "attn.c_attn.bias", {3 * C}});
    p.push_back({h + "attn.c_proj.weight", {C, C}});
    p.push_back({h + "attn.c_proj.bias", {C}});
    p.push_back({h + "ln_2.weight", {C}});
    p.push_back({h + "ln_2.bias", {C}});
    p.push_back({h + "mlp.c_fc.weight", {4 * C, C}});
    p.push_back({h + "mlp.c_fc.bias", {4 * C}});
    p.push_back({h + "mlp.c_proj.weight", {C, 4 * C}});
    p.push_back({h + "mlp.c_proj.bias", {C}});
  }
  p.push_back({"transformer.ln_f.weight", {C}});
  p.push_back({"transformer.ln_f.bias", {C}});
  return p;
}

// Mean cross-entropy over targets != -1, in double, from the stored logits.
double cross_entropy(const std::vector<float>& logits, const std::vector<std::int32_t>& targets, std::size_t V) {
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == -1) continue;
    const float* row = logits.data() + r * V;
    const double mx = *std::max_element(row, row + V);
    double z = 0;
    for (std::size_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
    sum += std::log(z) + mx - row[targets[r]];
    ++n;
  }
  return sum / static_cast<double>(n);
}

bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

TEST(GptTinyFixture, HasConfigBatchesAndEveryParameter) {
  const auto fx = Fixture::load(kGptTiny);
  const auto V = static_cast<std::uint64_t>(fx.scalar("config/vocab_size"));
  const auto Tmax = static_cast<std::uint64_t>(fx.scalar("config/block_size"));
  const auto L = static_cast<std::uint64_t>(fx.scalar("config/n_layer"));
  const auto C = static_cast<std::uint64_t>(fx.scalar("config/n_embd"));
  const auto B = static_cast<std::uint64_t>(fx.scalar("config/batch"));
  const auto T = static_cast<std::uint64_t>(fx.scalar("config/seq"));
  EXPECT_EQ(V, 64u);
  EXPECT_EQ(Tmax, 16u);
  EXPECT_EQ(L, 2u);
  EXPECT_EQ(fx.scalar("config/n_head"), 4.0);
  EXPECT_EQ(C, 32u);
  EXPECT_EQ(B, 4u);
  EXPECT_EQ(T, 16u);
  EXPECT_EQ(fx.scalar("adamw/lr"), 1e-3);
  EXPECT_EQ(fx.scalar("adamw/weight_decay"), 0.1);
  EXPECT_EQ(fx.scalar("adamw/steps"), 10.0);

  const auto params = gpt_params(V, Tmax, L, C);
  std::size_t total = 0;
  for (const auto& [name, shape] : params) {
    for (const std::string prefix : {"", "grad/", "batch2/grad/", "final/", "final_clip/"}) {
      ASSERT_TRUE(fx.has(prefix + name)) << prefix + name;
      EXPECT_EQ(fx.shape(prefix + name), shape) << prefix + name;
      EXPECT_TRUE(all_finite(fx.f32(prefix + name))) << prefix + name;
    }
    total += fx.numel(name);
    // Every gradient is non-trivial (LN params and biases were perturbed for this).
    const auto g = fx.f32("grad/" + name);
    EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float x) { return x != 0.f; })) << name;
    EXPECT_NE(fx.f32(name), fx.f32("final/" + name)) << name;
  }
  EXPECT_EQ(total, 28032u);  // 2*(12*C*C + 13*C) + (V + Tmax + 2)*C
  EXPECT_FALSE(fx.has("lm_head.weight"));  // tied: stored once as transformer.wte.weight

  for (const std::string b : {"", "batch2/"}) {
    EXPECT_EQ(fx.shape(b + "idx"), (Shape{B, T}));
    EXPECT_EQ(fx.shape(b + "targets"), (Shape{B, T}));
    EXPECT_EQ(fx.shape(b + "logits"), (Shape{B, T, V}));
    for (auto i : fx.i32(b + "idx")) EXPECT_TRUE(i >= 0 && i < static_cast<std::int32_t>(V));
    for (auto t : fx.i32(b + "targets")) EXPECT_TRUE(t >= -1 && t < static_cast<std::int32_t>(V));
  }
  for (std::uint64_t l = 0; l < L; ++l) EXPECT_EQ(fx.shape("act/h." + std::to_string(l)), (Shape{B, T, C}));
  const auto t1 = fx.i32("targets");
  const auto t2 = fx.i32("batch2/targets");
  EXPECT_EQ(std::count(t1.begin(), t1.end(), -1), 0);
  EXPECT_GE(std::count(t2.begin(), t2.end(), -1), 3);  // batch 2 exercises ignore_index
}

TEST(GptTinyFixture, LossMatchesLogitsAndTrainingDecreasesIt) {
  const auto fx = Fixture::load(kGptTiny);
  const auto V = static_cast<std::size_t>(fx.scalar("config/vocab_size"));
  const double loss = fx.scalar("loss");
  ASSERT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, std::log(static_cast<double>(V)), 0.3);  // near-uniform predictions at init
  // The stored loss is the mean cross-entropy of the stored logits (ignore_index=-1 for batch 2).
  EXPECT_NEAR(loss, cross_entropy(fx.f32("logits"), fx.i32("targets"), V), 1e-5);
  const auto t2 = fx.i32("batch2/targets");
  const double ce2 = cross_entropy(fx.f32("batch2/logits"), t2, V);
  EXPECT_NEAR(fx.scalar("batch2/loss"), ce2, 1e-5);
  auto t2_all = t2;  // counting ignored targets as real ones would give a different loss
  for (auto& t : t2_all) t = t < 0 ? 0 : t;
  EXPECT_GT(std::abs(cross_entropy(fx.f32("batch2/logits"), t2_all, V) - ce2), 1e-4);

  for (const std::string run : {"adamw_losses", "adamw_clip_losses"}) {
    const auto losses = fx.f32(run);
    ASSERT_EQ(losses.size(), 10u) << run;
    ASSERT_TRUE(all_finite(losses)) << run;
    EXPECT_FLOAT_EQ(losses[0], static_cast<float>(loss)) << run;  // recorded before the first step
    int decreasing = 0;
    for (std::size_t i = 1; i < losses.size(); ++i) decreasing += losses[i] < losses[i - 1];
    EXPECT_GE(decreasing, 8) << run;
    EXPECT_LT(losses.back(), losses.front() - 0.1) << run;
  }
  const auto norms = fx.f32("adamw_clip_grad_norms");
  ASSERT_EQ(norms.size(), 10u);
  for (float n : norms) EXPECT_TRUE(std::isfinite(n) && n > 0.f);
  // Some steps are clipped (norm > 1) and some are not, so both paths of clipping are exercised.
  EXPECT_TRUE(std::any_of(norms.begin(), norms.end(), [](float n) { return n > 1.f; }));
  EXPECT_TRUE(std::any_of(norms.begin(), norms.end(), [](float n) { return n < 1.f; }));
}

}  // namespace
