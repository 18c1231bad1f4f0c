#include "parallel/engine/checkpoint_policy.hpp"

#include <cstdio>
#include <filesystem>

#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/retention.hpp"

namespace strata::parallel {

CheckpointOptions checkpoint_options(const config::Config& cfg) {
  const auto& c = cfg.strata.checkpoint;
  CheckpointOptions o;
  o.root = c.dir;
  o.retention.save_total_limit = c.save_total_limit;
  o.retention.keep_every = c.keep_every;
  o.async = c.async;
  return o;
}

CheckpointPolicy::CheckpointPolicy(const config::Config& cfg, const Group& world, const Group& dp,
                                   nn::ParamStore& store, train::Trainer& trainer, int zero_stage,
                                   CheckpointStage stage)
    : cfg_(cfg),
      lead_(world.rank() == 0),
      ckpt_(world, dp, store, trainer, zero_stage, checkpoint_options(cfg), std::move(stage)) {}

std::int64_t CheckpointPolicy::resume() {
  const std::string& spec = cfg_.strata.checkpoint.resume;
  const auto loaded = ckpt_.resume(spec);
  // What a killed predecessor left for its retention to do (it runs after a save's commit):
  // checkpoints past the limit, incomplete step directories, ".deleting-" directories whose
  // deletion it did not finish. Done now, not only after this run's first save, which may never
  // come (a job killed after its last save resumes with no step left). Only rank 0 removes, as
  // after a save; never the checkpoint just loaded (the newest complete one, or what `latest`
  // names).
  if (lead_ && enabled() && std::filesystem::is_directory(ckpt_.options().root))
    checkpoint::apply_retention(ckpt_.options().root, ckpt_.options().retention);
  if (!loaded) {
    if (lead_ && spec == "auto" && enabled())
      std::printf("checkpoints: none under %s yet; starting fresh\n", ckpt_.options().root.c_str());
    return 0;
  }
  if (const auto& s = loaded->state.sampler; s && data_) data_->set_state({s->position, s->epoch});
  resumed_extra_ = loaded->state.extra;
  if (lead_)
    std::printf(
        "resumed from %s: step %lld (saved on %d ranks, dp %d, ZeRO stage %d), data "
        "position %llu\n",
        loaded->step_dir.c_str(), static_cast<long long>(loaded->step), loaded->saved_layout.world,
        loaded->saved_layout.dp, loaded->saved_zero_stage,
        static_cast<unsigned long long>(data_ ? data_->state().position : 0));
  last_saved_ = loaded->step;
  return loaded->step;
}

bool CheckpointPolicy::due(std::int64_t step) const {
  const std::int64_t interval = cfg_.strata.checkpoint.interval;
  return enabled() && interval > 0 && step % interval == 0;
}

void CheckpointPolicy::save(std::int64_t step) {
  JobState job;
  job.step = step;
  job.config = config::to_json(cfg_);
  if (data_) {
    const data::SamplerState s = data_->state();
    job.sampler = checkpoint::SamplerRecord{s.position, s.epoch};
  }
  job.extra = extra_;
  ckpt_.save(job);
  last_saved_ = step;
  if (lead_) {
    std::printf("checkpoint: step %lld -> %s/%s%s\n", static_cast<long long>(step),
                ckpt_.options().root.c_str(), checkpoint::step_dir_name(step).c_str(),
                ckpt_.options().async ? " (writing in the background)" : "");
    std::fflush(stdout);
  }
}

}  // namespace strata::parallel
