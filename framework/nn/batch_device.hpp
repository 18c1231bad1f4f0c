// A batch field where the model computes: the batch lives in host memory (nn::Batch), a model
// computing on a GPU reads a copy of it there, queued at the start of its forward. Gpt and
// GptStage (the pipeline's stages) both take their tokens and targets through these.
#pragma once

#include <array>
#include <cstddef>

#include "framework/backend/stream.hpp"
#include "framework/core/tensor.hpp"
#include "framework/nn/context.hpp"

namespace strata::nn {

// `t` itself on the CPU and the CPU's meta device (a plan reads host batches); on a GPU, and on
// meta_cuda() (a GPU job's plan, which charges the copy), a copy in ctx.activations: through
// ctx.uploads when it has them (the host does not wait), else copied at once.
Tensor on_compute_device(const Context& ctx, const Tensor& t);

// The pinned host buffers a GPU's batch fields are copied through. Each upload is a copy queued on
// the device's current stream, after the kernels queued there so far: the host never waits for
// the GPU to catch up with it, only, before it refills a buffer, for that buffer's last copy
// (kBuffers uploads earlier: two micro-batches' tokens and targets), which has long run unless
// the host is that far ahead. The buffers are allocated at the first upload (pinned, charged to
// the host tier as Category::other) and grow with the fields; each has one event, recorded again
// by each copy from it. On meta_cuda() (a plan) the same buffers are charged and nothing moves.
class BatchUploads {
 public:
  static constexpr std::size_t kBuffers = 4;
  BatchUploads() = default;
  BatchUploads(const BatchUploads&) = delete;
  BatchUploads& operator=(const BatchUploads&) = delete;
  ~BatchUploads();  // waits for the copies still reading the buffers

  // A copy of host tensor `t` (contiguous) allocated with `to` (a GPU's memory, or meta_cuda()).
  Tensor upload(const Tensor& t, const TensorOptions& to);

 private:
  struct Buffer {
    Tensor pinned;  // u8
    Event copied;   // the last copy from it
  };
  std::array<Buffer, kBuffers> bufs_;
  std::size_t next_ = 0;
};

// What backward keeps of batch field `given`, whose compute-device tensor is `on_device`: the
// device copy as it is, or a copy of `given` itself (the caller's batch buffers are refilled for
// the next micro-batch).
Tensor kept_for_backward(const Context& ctx, const Tensor& on_device, const Tensor& given);

}  // namespace strata::nn
