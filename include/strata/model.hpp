// strata/model.hpp: what declaring a model needs — tensors, parameters with their placement and
// init rule, modules with explicit forward/backward, the nn::Model interface the engine trains,
// a micro-batch and its data source, the built-in layers, and the tensor ops (strata::ops) every
// backend implements. docs/api.md is the guide.
#pragma once

#include "framework/backend/ops/ops.hpp"
#include "framework/core/error.hpp"
#include "framework/core/rng.hpp"
#include "framework/core/tensor.hpp"
#include "framework/nn/batch.hpp"
#include "framework/nn/context.hpp"
#include "framework/nn/layer_norm.hpp"
#include "framework/nn/linear.hpp"
#include "framework/nn/model.hpp"
#include "framework/nn/module.hpp"
#include "framework/nn/parameter.hpp"
