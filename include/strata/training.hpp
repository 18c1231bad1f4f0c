// strata/training.hpp: what training a model needs — the JSON config (DeepSpeed keys + the strata
// section), the world of ranks, parallel::Training (ZeRO stages, offload, mixed precision, the
// optimizer, checkpoints and resume, all from the config) and the step's results (metrics).
// docs/api.md is the guide.
#pragma once

#include "framework/config/config.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/train/from_config.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"
