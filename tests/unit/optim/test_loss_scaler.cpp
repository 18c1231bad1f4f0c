// Dynamic loss scaling: scale sequences on scripted overflow patterns, written out by hand from
// DeepSpeed's update_scale rules (defaults: 2^16, window 1000, hysteresis 2), and checkpointing.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/precision/loss_scaler.hpp"

namespace strata::precision {
namespace {

// Feeds `pattern` ('O' overflow, '.' clean) and returns the scale after each update.
std::vector<double> run(DynamicLossScaler& s, const std::string& pattern) {
  std::vector<double> out;
  for (char c : pattern) {
    s.update(c == 'O');
    out.push_back(s.scale());
  }
  return out;
}

void clean_steps(DynamicLossScaler& s, int n) {
  for (int i = 0; i < n; ++i) s.update(false);
}

TEST(DynamicLossScaler, DeepSpeedConfigDefaults) {
  DynamicLossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_TRUE(s.dynamic());
  const LossScalerState st = s.state();
  EXPECT_EQ(st.cur_iter, 0);
  EXPECT_EQ(st.last_overflow_iter, -1);
  EXPECT_EQ(st.cur_hysteresis, 2);
}

TEST(DynamicLossScaler, GrowsAfterEveryScaleWindowCleanSteps) {
  DynamicLossScaler s;
  clean_steps(s, 999);
  EXPECT_EQ(s.scale(), 65536.0);  // iterations 0..998: (i + 1) % 1000 != 0
  s.update(false);                // iteration 999: (999 - (-1)) % 1000 == 0
  EXPECT_EQ(s.scale(), 131072.0);
  clean_steps(s, 999);
  EXPECT_EQ(s.scale(), 131072.0);
  s.update(false);  // iteration 1999
  EXPECT_EQ(s.scale(), 262144.0);
}

TEST(DynamicLossScaler, ThreeOverflowsInARow) {
  DynamicLossScaler s;
  // 1st: hysteresis 2 → 1, scale kept; 2nd and 3rd: hysteresis is 1 → halve.
  EXPECT_EQ(run(s, "OOO"), (std::vector<double>{65536, 32768, 16384}));
  EXPECT_EQ(s.state(), (LossScalerState{16384, 3, 2, 1}));
  // Growth needs (cur_iter - last_overflow_iter) % 1000 == 0, i.e. iteration 1002.
  clean_steps(s, 999);  // iterations 3..1001
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.state().cur_hysteresis, 1) << "clean steps alone do not restore hysteresis";
  s.update(false);  // iteration 1002: grow, and hysteresis back to 2
  EXPECT_EQ(s.state(), (LossScalerState{32768, 1003, 2, 2}));
}

TEST(DynamicLossScaler, OverflowEvery500StepsHalvesUntilStuckAtMinimum) {
  DynamicLossScaler s;
  // Overflows at iterations 0, 500, 1000, ...: never 1000 clean steps, so no growth. The first
  // only spends the hysteresis; each later one halves: after iteration 500k the scale is
  // 2^(16-k), reaching min_scale 1 at iteration 8000.
  const double want[] = {65536, 32768, 16384, 8192, 4096, 2048, 1024, 512, 256,
                         128,   64,    32,    16,   8,    4,    2,    1};
  for (int k = 0; k <= 16; ++k) {
    s.update(true);
    EXPECT_EQ(s.scale(), want[k]) << "after the overflow at iteration " << 500 * k;
    clean_steps(s, 499);
    EXPECT_EQ(s.scale(), want[k]);
  }
  EXPECT_EQ(s.state().cur_iter, 8500);
  try {
    s.update(true);  // iteration 8500: at the minimum already
    FAIL() << "expected the stuck-at-minimum error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.tag(), "precision");
    EXPECT_NE(what.find("minimum"), std::string::npos) << what;
    EXPECT_NE(what.find("bf16"), std::string::npos) << what;
    EXPECT_NE(what.find("learning rate"), std::string::npos) << what;
    EXPECT_NE(what.find("8500"), std::string::npos) << what;
  }
}

TEST(DynamicLossScaler, ConsecutiveHysteresisForgivesIsolatedOverflows) {
  DynamicLossScaler plain;
  EXPECT_EQ(run(plain, "O.O"), (std::vector<double>{65536, 65536, 32768}));
  DynamicLossScaler consecutive(DynamicLossScalerOptions{.consecutive_hysteresis = true});
  // A clean step restores the hysteresis, so only two overflows in a row lower the scale.
  EXPECT_EQ(run(consecutive, "O.O.O"), (std::vector<double>{65536, 65536, 65536, 65536, 65536}));
  EXPECT_EQ(run(consecutive, "O"), (std::vector<double>{32768}));  // 2nd in a row
}

TEST(DynamicLossScaler, DelayedShiftOneHalvesAtOnce) {
  DynamicLossScaler s(DynamicLossScalerOptions{.delayed_shift = 1});
  EXPECT_EQ(run(s, "OO.O"), (std::vector<double>{32768, 16384, 16384, 8192}));
}

TEST(DynamicLossScaler, ClampsAtMinScaleThenFailsOrStays) {
  DynamicLossScaler s(DynamicLossScalerOptions{.init_scale = 3, .min_scale = 2, .delayed_shift = 1});
  s.update(true);
  EXPECT_EQ(s.scale(), 2.0);  // max(3/2, 2)
  EXPECT_THROW(s.update(true), Error);
  DynamicLossScaler lenient(DynamicLossScalerOptions{
      .init_scale = 3, .min_scale = 2, .delayed_shift = 1, .raise_error_at_min_scale = false});
  EXPECT_EQ(run(lenient, "OOO"), (std::vector<double>{2, 2, 2}));
}

TEST(DynamicLossScaler, StateRoundTripsForCheckpoints) {
  std::mt19937 rng(9);
  std::bernoulli_distribution overflow(0.01);
  std::vector<bool> pattern(4000);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = overflow(rng);
  const DynamicLossScalerOptions opts{.scale_window = 50};
  DynamicLossScaler a(opts);
  for (std::size_t i = 0; i < 1234; ++i) a.update(pattern[i]);
  DynamicLossScaler b(opts);
  b.set_state(a.state());
  EXPECT_EQ(b.state(), a.state());
  double lo = a.scale(), hi = a.scale();
  for (std::size_t i = 1234; i < pattern.size(); ++i) {
    a.update(pattern[i]);
    b.update(pattern[i]);
    ASSERT_EQ(a.state(), b.state()) << i;
    lo = std::min(lo, a.scale());
    hi = std::max(hi, a.scale());
  }
  EXPECT_LT(lo, hi) << "the pattern should move the scale";
  EXPECT_THROW(b.set_state(LossScalerState{1024, 10, 3, 0}), Error);   // hysteresis 0
  EXPECT_THROW(b.set_state(LossScalerState{1024, 10, 3, 3}), Error);   // > delayed_shift
  EXPECT_THROW(b.set_state(LossScalerState{0, 10, 3, 1}), Error);      // scale
  EXPECT_THROW(b.set_state(LossScalerState{1024, 10, 10, 1}), Error);  // overflow not yet seen
}

TEST(LossScaler, StaticScaleAndFactory) {
  auto d = make_loss_scaler(0.0);
  EXPECT_TRUE(d->dynamic());
  EXPECT_EQ(d->scale(), 65536.0);
  auto s = make_loss_scaler(128.0);
  EXPECT_FALSE(s->dynamic());
  s->update(true);
  s->update(false);
  EXPECT_EQ(s->scale(), 128.0);
  EXPECT_THROW(make_loss_scaler(-1.0), UserError);
  EXPECT_THROW(DynamicLossScaler(DynamicLossScalerOptions{.scale_window = 0}), UserError);
  EXPECT_THROW(DynamicLossScaler(DynamicLossScalerOptions{.delayed_shift = 0}), UserError);
  EXPECT_THROW(DynamicLossScaler(DynamicLossScalerOptions{.scale_factor = 1.0}), UserError);
}

}  // namespace
}  // namespace strata::precision
