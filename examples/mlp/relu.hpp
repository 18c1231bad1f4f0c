// Relu: a layer written by the user, with its backward rule next to its forward. It keeps only
// its output for backward (enough to know where the gradient flows).
#pragma once

#include "framework/nn/module.hpp"

namespace mlp {

class Relu : public strata::nn::Module {
 public:
  explicit Relu(std::string prefix) : Module(std::move(prefix)) {}
  strata::Tensor forward(strata::nn::Context& ctx, const strata::Tensor& x);
  strata::Tensor backward(strata::nn::Context& ctx, const strata::Tensor& dy);
};

}  // namespace mlp
