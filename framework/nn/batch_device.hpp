// A batch field where the model computes: the batch lives in host memory (nn::Batch), a model
// computing on a GPU reads a copy of it there, made at the start of its forward. Gpt and GptStage
// (the pipeline's stages) both take their tokens and targets through these.
#pragma once

#include "framework/core/tensor.hpp"
#include "framework/nn/context.hpp"

namespace strata::nn {

// `t` itself on the CPU and the CPU's meta device (a plan reads host batches); on a GPU, and on
// meta_cuda() (a GPU job's plan, which charges the copy), a copy in ctx.activations.
Tensor on_compute_device(const Context& ctx, const Tensor& t);

// What backward keeps of batch field `given`, whose compute-device tensor is `on_device`: the
// device copy as it is, or a copy of `given` itself (the caller's batch buffers are refilled for
// the next micro-batch).
Tensor kept_for_backward(const Context& ctx, const Tensor& on_device, const Tensor& given);

}  // namespace strata::nn
