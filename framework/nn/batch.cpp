#include "framework/nn/batch.hpp"

#include <vector>

#include "framework/core/convert.hpp"

namespace strata::nn {

Batch::Batch(const std::vector<BatchField>& fields, const TensorOptions& opts) : fields_(fields) {
  for (const auto& f : fields) tensors_.push_back(Tensor::zeros(f.shape, f.dtype, opts));
}

Batch Batch::rows(std::int64_t begin, std::int64_t end) const {
  Batch b;
  b.fields_ = fields_;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    STRATA_CHECK(tensors_[i].rank() >= 1, "nn", "batch field '{}' has no sample dimension",
                 fields_[i].name);
    b.tensors_.push_back(tensors_[i].slice(0, begin, end));
    b.fields_[i].shape = b.tensors_.back().shape();
  }
  return b;
}

Batch Batch::clone() const {
  Batch b;
  b.fields_ = fields_;
  for (const Tensor& t : tensors_) b.tensors_.push_back(t.to(t.dtype(), host_options()));
  return b;
}

void round_inputs_to_fp16(Batch& batch) {
  std::vector<std::uint16_t> half;
  for (const Tensor& t : batch.tensors()) {
    if (t.dtype() != DType::f32) continue;
    STRATA_CHECK(t.is_contiguous(), "nn", "auto_cast needs contiguous batch fields");
    const auto n = static_cast<std::size_t>(t.numel());
    half.resize(n);
    f32_to_f16(t.data<float>(), half.data(), n);
    f16_to_f32(half.data(), t.data<float>(), n);
  }
}

const Tensor& Batch::operator[](std::string_view name) const {
  for (std::size_t i = 0; i < fields_.size(); ++i)
    if (fields_[i].name == name) return tensors_[i];
  std::string names;
  for (const auto& f : fields_) names += (names.empty() ? "" : ", ") + f.name;
  fail("nn", "the batch has no field '{}' (it has: {})", name, names.empty() ? "none" : names);
}

}  // namespace strata::nn
