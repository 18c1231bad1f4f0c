// The non-tensor state a checkpoint carries so that training resumes bit-exactly: per job
// (optimizer update count, LR-scheduler position, loss scaler, data-sampler position) in the
// manifest, and per rank (RNG streams) in each rank's file. Field meanings mirror
// precision::LossScalerState, data::SamplerState and Philox(seed, counter); the checkpoint layer
// keeps its own copies so that framework/checkpoint depends only on core.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace strata::checkpoint {

using json = nlohmann::json;

// precision::LossScalerState plus whether the scaler is dynamic.
struct LossScalerRecord {
  bool dynamic = true;
  double cur_scale = 1.0;
  std::int64_t cur_iter = 0;
  std::int64_t last_overflow_iter = -1;
  std::int64_t cur_hysteresis = 0;
  bool operator==(const LossScalerRecord&) const = default;
};

// data::SamplerState.
struct SamplerRecord {
  std::uint64_t position = 0;
  std::uint64_t epoch = 0;
  bool operator==(const SamplerRecord&) const = default;
};

// A Philox stream: (seed, counter).
struct RngRecord {
  std::uint64_t seed = 0;
  std::uint64_t counter = 0;
  bool operator==(const RngRecord&) const = default;
};

// State shared by every rank (written once, in the manifest).
struct TrainState {
  std::string optimizer;               // "adamw", "sgd" ("" = no optimizer state saved)
  std::int64_t optimizer_updates = 0;  // applied updates (AdamW bias-correction step count)
  std::int64_t scheduler_steps =
      0;  // LR-scheduler steps taken (DeepSpeed last_batch_iteration + 1)
  std::optional<LossScalerRecord> loss_scaler;
  std::optional<SamplerRecord> sampler;
  json extra = json::object();  // anything else the engine wants back verbatim
  bool operator==(const TrainState&) const = default;
};

// State private to one rank (written in that rank's file).
struct RankState {
  std::map<std::string, RngRecord> rngs;  // by purpose: "dropout", "sample", ...
  json extra = json::object();
  bool operator==(const RankState&) const = default;
};

json to_json(const TrainState& s);
json to_json(const RankState& s);
// Strict parsers: unknown keys, wrong types or missing keys throw strata::Error naming the key.
TrainState train_state_from_json(const json& j);
RankState rank_state_from_json(const json& j);

}  // namespace strata::checkpoint
