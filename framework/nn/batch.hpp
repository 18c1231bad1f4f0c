// Batch: one micro-batch as named tensors (a GPT's "tokens" and "targets", a classifier's "x" and
// "labels"), laid out as the model's batch_fields say, in host memory for the data to fill.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "framework/core/tensor.hpp"
#include "framework/data/sampler_state.hpp"

namespace strata::nn {

struct BatchField {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

class Batch {
 public:
  Batch() = default;
  // Allocates every field (zeroed) with `opts` (host memory by default).
  explicit Batch(const std::vector<BatchField>& fields, const TensorOptions& opts = host_options());
  // The field named `name`; throws naming the fields there are.
  const Tensor& operator[](std::string_view name) const;
  const std::vector<BatchField>& fields() const { return fields_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Samples [begin, end) of every field (views along dim 0, the sample dimension): a smaller
  // micro-batch inside this one.
  Batch rows(std::int64_t begin, std::int64_t end) const;
  // A copy with storage of its own (same fields, same values, host memory).
  Batch clone() const;

  static TensorOptions host_options() {
    return TensorOptions{Device::cpu(), Tier::host, Category::other, nullptr};
  }

 private:
  std::vector<BatchField> fields_;
  std::vector<Tensor> tensors_;
};

// DeepSpeed's fp16.auto_cast: every f32 field (the model's floating-point inputs) rounded to the
// nearest fp16 value in place; other fields (token ids, labels) untouched.
void round_inputs_to_fp16(Batch& batch);

// Where micro-batches come from: fills one (this rank's share of the global batch) at a time, and
// says where it is so that a checkpoint can resume at exactly the next sample.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void next(Batch& batch) = 0;
  virtual data::SamplerState state() const = 0;
  // Resumes at `s` (from state(), possibly of a run with another data-parallel size).
  virtual void set_state(const data::SamplerState& s) = 0;
};

}  // namespace strata::nn
