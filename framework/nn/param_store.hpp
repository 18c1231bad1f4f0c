// ParamStore: materialises declared parameters as views into one flat buffer per unit (one for
// values, one for gradients), padded to a multiple of `pad_multiple` elements so the buffer
// splits evenly over data-parallel ranks. Initialises them from the counter-based generator.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/parameter.hpp"

namespace strata::nn {

struct UnitLayout {
  std::vector<Parameter*> params;
  std::vector<std::int64_t> offsets;  // element offset of each parameter in the flat buffer
  std::int64_t numel = 0;             // sum of parameter sizes
  std::int64_t padded = 0;            // numel rounded up to a multiple of pad_multiple
};

struct ParamStoreOptions {
  DType param_dtype = DType::f32;
  DType grad_dtype = DType::f32;
  int pad_multiple = 1;
  TensorOptions memory{};  // device/tier/ledger; categories are set per buffer
};

class ParamStore {
 public:
  ParamStore(std::vector<std::vector<Parameter*>> units, const ParamStoreOptions& opts);

  // Writes every parameter's initial value: a pure function of (seed, name, element index).
  void initialize(std::uint64_t seed);
  void zero_grads();

  std::size_t num_units() const { return layouts_.size(); }
  const UnitLayout& layout(std::size_t u) const { return layouts_[u]; }
  const Tensor& values(std::size_t u) const { return values_[u]; }
  const Tensor& grads(std::size_t u) const { return grads_[u]; }
  std::int64_t total_numel() const;
  const ParamStoreOptions& options() const { return opts_; }
  // Every parameter, in unit order.
  std::vector<Parameter*> parameters() const;
  Parameter* find(const std::string& name) const;

 private:
  ParamStoreOptions opts_;
  std::vector<UnitLayout> layouts_;
  std::vector<Tensor> values_, grads_;
};

}  // namespace strata::nn
