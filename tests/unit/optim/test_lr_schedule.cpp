// LR schedules against values computed by hand from DeepSpeed's formulas
// (deepspeed/runtime/lr_schedules.py), including its index convention and quirks.
#include <gtest/gtest.h>

#include "framework/core/error.hpp"
#include "framework/optim/lr_schedule.hpp"

namespace strata::optim {
namespace {

constexpr double kTol = 1e-15;

TEST(LRSchedule, ConstantIsTheOptimizerLr) {
  auto s = make_schedule(ScheduleSpec{}, 3e-4);
  EXPECT_STREQ(s->name(), "constant");
  for (std::int64_t i : {-1, 0, 1, 1000000}) EXPECT_EQ(s->lr(i), 3e-4);
}

TEST(LRSchedule, WarmupLRLogRisesAsLogOfStepThenHolds) {
  ScheduleSpec spec{.type = "WarmupLR", .warmup_min_lr = 0.0, .warmup_max_lr = 0.01,
                    .warmup_num_steps = 10};  // warmup_type defaults to "log", as DeepSpeed
  auto s = make_schedule(spec, 1.0);
  EXPECT_EQ(s->lr(-1), 0.0);                        // set at construction: min_lr
  EXPECT_EQ(s->lr(0), 0.0);                         // log(1) = 0
  EXPECT_NEAR(s->lr(1), 0.0030102999566398, kTol);  // 0.01 * log(2)/log(10)
  EXPECT_NEAR(s->lr(4), 0.0069897000433602, kTol);  // 0.01 * log(5)/log(10)
  EXPECT_NEAR(s->lr(9), 0.01, kTol);                // log(10)/log(10)
  EXPECT_EQ(s->lr(10), 0.01);
  EXPECT_EQ(s->lr(123456), 0.01);
}

TEST(LRSchedule, WarmupLRLinearAndItsDefaults) {
  ScheduleSpec spec{.type = "WarmupLR", .warmup_min_lr = 0.001, .warmup_max_lr = 0.011,
                    .warmup_num_steps = 10, .warmup_type = "linear"};
  auto s = make_schedule(spec, 1.0);
  EXPECT_EQ(s->lr(-1), 0.001);
  EXPECT_EQ(s->lr(0), 0.001);
  EXPECT_NEAR(s->lr(5), 0.006, kTol);  // 0.001 + 0.01 * 5/10
  EXPECT_NEAR(s->lr(9), 0.010, kTol);
  EXPECT_EQ(s->lr(10), 0.011);
  // warmup_max_lr unset → the optimizer's lr; warmup_num_steps below 2 → 2.
  auto d = make_schedule(ScheduleSpec{.type = "WarmupLR", .warmup_num_steps = 1,
                                      .warmup_type = "linear"},
                         0.5);
  EXPECT_EQ(d->lr(0), 0.0);
  EXPECT_EQ(d->lr(1), 0.25);  // 0.5 * 1/2
  EXPECT_EQ(d->lr(2), 0.5);
}

TEST(LRSchedule, DeepSpeedIndexConventionForUpdates) {
  // The engine steps the scheduler after each applied update: update k runs with lr(k - 2).
  ScheduleSpec spec{.type = "WarmupLR", .warmup_min_lr = 0.001, .warmup_max_lr = 0.011,
                    .warmup_num_steps = 10, .warmup_type = "linear"};
  auto s = make_schedule(spec, 1.0);
  EXPECT_EQ(s->lr_for_update(1), 0.001);  // construction-time rate
  EXPECT_EQ(s->lr_for_update(2), 0.001);  // lr(0)
  EXPECT_NEAR(s->lr_for_update(3), 0.002, kTol);
  EXPECT_EQ(s->lr_for_update(12), 0.011);
}

TEST(LRSchedule, WarmupDecayLRDecaysLinearlyToZeroAtTotal) {
  ScheduleSpec spec{.type = "WarmupDecayLR", .warmup_min_lr = 0.0, .warmup_max_lr = 0.01,
                    .warmup_num_steps = 10, .warmup_type = "linear", .total_num_steps = 100};
  auto s = make_schedule(spec, 1.0);
  EXPECT_STREQ(s->name(), "WarmupDecayLR");
  EXPECT_NEAR(s->lr(5), 0.005, kTol);   // warmup: 5/10
  EXPECT_EQ(s->lr(10), 0.01);           // (100-10)/90
  EXPECT_EQ(s->lr(55), 0.005);          // (100-55)/90
  EXPECT_EQ(s->lr(100), 0.0);
  EXPECT_EQ(s->lr(150), 0.0);           // clamped at 0
  // warmup_max_lr unset → DeepSpeed's WarmupDecayLR default 0.001 (not the optimizer lr).
  auto d = make_schedule(ScheduleSpec{.type = "WarmupDecayLR", .warmup_num_steps = 10,
                                      .total_num_steps = 100},
                         0.5);
  EXPECT_NEAR(d->lr(40), 0.0006666666666666667, kTol);  // 0.001 * 60/90
}

TEST(LRSchedule, WarmupCosineLRFollowsDeepSpeedRatios) {
  ScheduleSpec spec{.type = "WarmupCosineLR", .warmup_num_steps = 10,
                    .warmup_type = "linear", .total_num_steps = 110, .warmup_min_ratio = 0.1,
                    .cos_min_ratio = 0.01};
  auto s = make_schedule(spec, 0.1);
  EXPECT_EQ(s->lr(-1), 0.0);                   // DeepSpeed sets 0 at construction
  EXPECT_NEAR(s->lr(0), 0.01, kTol);           // 0.1 * (0.1 + 0 * 0.9)
  EXPECT_NEAR(s->lr(5), 0.055, kTol);          // 0.1 * (0.1 + 0.5 * 0.9)
  // i = 10: real_last_step = 1, real_total = 100: ratio = 0.01 + 0.99 * (1 + cos(pi/100))/2.
  EXPECT_NEAR(s->lr(10), 0.0999755747381037, kTol);
  EXPECT_NEAR(s->lr(59), 0.0505, kTol);        // cos(pi/2): 0.01 + 0.99 * 0.5
  EXPECT_NEAR(s->lr(109), 0.001, kTol);        // cos(pi): cos_min_ratio
  // DeepSpeed does not clamp past total_num_steps: the cosine comes back up.
  EXPECT_NEAR(s->lr(209), 0.1, kTol);          // cos(2 pi)
  ScheduleSpec log_spec = spec;
  log_spec.warmup_type = "log";
  // 0.1 * (0.1 + 0.9 * log(4)/log(10))
  EXPECT_NEAR(make_schedule(log_spec, 0.1)->lr(3), 0.0641853992195166, kTol);
}

TEST(LRSchedule, RejectsBadSpecs) {
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "OneCycle"}, 1.0), UserError);
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "warmuplr"}, 1.0), UserError);
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "WarmupLR", .warmup_type = "cosine"}, 1.0),
               UserError);
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "WarmupDecayLR"}, 1.0), UserError);  // no total
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "WarmupDecayLR", .warmup_num_steps = 50,
                                          .total_num_steps = 10},
                             1.0),
               UserError);
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "WarmupCosineLR", .warmup_num_steps = 10,
                                          .total_num_steps = 10},
                             1.0),
               UserError);  // DeepSpeed would divide by zero
  EXPECT_THROW(make_schedule(ScheduleSpec{.type = "WarmupLR", .warmup_num_steps = -1}, 1.0),
               UserError);
  try {
    make_schedule(ScheduleSpec{.type = "Bogus"}, 1.0);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("WarmupCosineLR"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::optim
