#include "framework/checkpoint/train_state.hpp"

#include "framework/checkpoint/json_fields.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace {

json rng_json(const RngRecord& r) {
  return {{"seed", r.seed}, {"counter", r.counter}};
}

}  // namespace

json to_json(const TrainState& s) {
  json j = {{"optimizer", s.optimizer},
            {"optimizer_updates", s.optimizer_updates},
            {"scheduler_steps", s.scheduler_steps},
            {"loss_scaler", nullptr},
            {"sampler", nullptr},
            {"extra", s.extra}};
  if (s.loss_scaler) {
    const auto& l = *s.loss_scaler;
    j["loss_scaler"] = {{"dynamic", l.dynamic},
                        {"cur_scale", l.cur_scale},
                        {"cur_iter", l.cur_iter},
                        {"last_overflow_iter", l.last_overflow_iter},
                        {"cur_hysteresis", l.cur_hysteresis}};
  }
  if (s.sampler) j["sampler"] = {{"position", s.sampler->position}, {"epoch", s.sampler->epoch}};
  return j;
}

json to_json(const RankState& s) {
  json rngs = json::object();
  for (const auto& [k, v] : s.rngs) rngs[k] = rng_json(v);
  return {{"rngs", rngs}, {"extra", s.extra}};
}

TrainState train_state_from_json(const json& j) {
  JsonFields f(j, "state");
  TrainState s;
  s.optimizer = f.string("optimizer");
  s.optimizer_updates = f.i64("optimizer_updates");
  s.scheduler_steps = f.i64("scheduler_steps");
  if (s.optimizer_updates < 0 || s.scheduler_steps < 0)
    fail("checkpoint", "state: negative optimizer_updates or scheduler_steps");
  if (const json* l = f.maybe("loss_scaler")) {
    JsonFields g(*l, "state.loss_scaler");
    LossScalerRecord r;
    r.dynamic = g.boolean("dynamic");
    r.cur_scale = g.number("cur_scale");
    r.cur_iter = g.i64("cur_iter");
    r.last_overflow_iter = g.i64("last_overflow_iter");
    r.cur_hysteresis = g.i64("cur_hysteresis");
    g.done();
    if (!(r.cur_scale > 0))
      fail("checkpoint", "state.loss_scaler.cur_scale must be > 0, got {}", r.cur_scale);
    s.loss_scaler = r;
  }
  if (const json* p = f.maybe("sampler")) {
    JsonFields g(*p, "state.sampler");
    s.sampler = SamplerRecord{g.u64("position"), g.u64("epoch")};
    g.done();
  }
  if (const json* e = f.maybe("extra")) s.extra = *e;
  f.done();
  return s;
}

RankState rank_state_from_json(const json& j) {
  JsonFields f(j, "rank state");
  RankState s;
  const json& rngs = f.need("rngs");
  if (!rngs.is_object()) fail("checkpoint", "rank state.rngs is not an object");
  for (auto it = rngs.begin(); it != rngs.end(); ++it) {
    JsonFields g(it.value(), "rank state.rngs." + it.key());
    s.rngs[it.key()] = RngRecord{g.u64("seed"), g.u64("counter")};
    g.done();
  }
  if (const json* e = f.maybe("extra")) s.extra = *e;
  f.done();
  return s;
}

}  // namespace strata::checkpoint
