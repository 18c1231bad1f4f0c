// Parameter: a declared weight (global name, shape, init rule, weight-decay flag) whose value and
// gradient the engine materialises as views into a unit's flat buffers.
#pragma once

#include <string>

#include "framework/core/tensor.hpp"

namespace strata::nn {

struct Init {
  enum class Kind { normal, zeros, ones } kind = Kind::zeros;
  float std = 0.0f;
  static Init normal(float std) { return {Kind::normal, std}; }
  static Init zeros() { return {Kind::zeros, 0.0f}; }
  static Init ones() { return {Kind::ones, 0.0f}; }
};

struct Parameter {
  std::string name;  // global name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;
  Init init;
  bool decay = false;  // weight decay applies (parameters with >= 2 dims)
  Tensor value;        // materialised by ParamStore (params dtype)
  Tensor grad;         // materialised by ParamStore (grads dtype)
};

// The parameter's materialised value / gradient; throws naming the parameter when the engine has
// not bound one (used before materialisation, or a ZeRO-3 unit used outside its gather).
const Tensor& value_of(const Parameter& p);
const Tensor& grad_of(const Parameter& p);

// Fills dst (n contiguous f32) with the init values of parameter elements [offset, offset + n):
// a pure function of (seed, name, element index), so any slice of any sharding is bit-identical.
void init_values(const Parameter& p, std::uint64_t seed, std::uint64_t offset, float* dst,
                 std::size_t n);

}  // namespace strata::nn
