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

// Where a parameter's elements live across tensor-parallel ranks: whole on every rank
// (replicated), or split along `dim` into `parts` with this process holding part `index`. With
// `stride` > 1 the split dimension is `stride` concatenated blocks (c_attn's q, k and v) and each
// block is split into parts, so a part is the same slice of every block (Megatron's
// partition_stride).
struct Placement {
  int dim = -1;  // -1: replicated
  int parts = 1, index = 0, stride = 1;
  bool split() const { return dim >= 0 && parts > 1; }
  // The whole parameter's shape, given this part's.
  Shape global_shape(const Shape& local) const;
  // Calls run(local_offset, global_offset, length) for each run of consecutive elements of the
  // local tensor that are consecutive in the whole parameter too (row-major), in local order.
  template <typename F>
  void for_each_run(const Shape& local, F&& run) const;
};

struct Parameter {
  std::string name;  // global name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;       // this process's part (the whole parameter unless placement.split())
  Placement placement;
  Init init;
  bool decay = false;  // weight decay applies (parameters with >= 2 dims)
  Tensor value;        // materialised by ParamStore (params dtype)
  Tensor grad;         // materialised by ParamStore (grads dtype)
};

// The parameter's materialised value / gradient; throws naming the parameter when the engine has
// not bound one (used before materialisation, or a ZeRO-3 unit used outside its gather).
const Tensor& value_of(const Parameter& p);
const Tensor& grad_of(const Parameter& p);

template <typename F>
void Placement::for_each_run(const Shape& local, F&& run) const {
  if (!split()) {
    run(std::int64_t{0}, std::int64_t{0}, local.numel());
    return;
  }
  const auto split_dim = static_cast<std::size_t>(dim);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < split_dim; ++d) outer *= local[d];
  for (std::size_t d = split_dim + 1; d < local.rank(); ++d) inner *= local[d];
  const std::int64_t d_local = local[split_dim], d_global = d_local * parts;
  const std::int64_t block = d_local / stride;  // rows of one block in this part
  for (std::int64_t o = 0; o < outer; ++o)
    for (int b = 0; b < stride; ++b)
      run((o * d_local + b * block) * inner,
          (o * d_global + b * block * parts + index * block) * inner, block * inner);
}

// Fills dst (n contiguous f32) with the init values of parameter elements [offset, offset + n)
// of this process's part: a pure function of (seed, name, element index in the whole parameter),
// so any slice of any sharding, tensor-parallel parts included, is bit-identical.
void init_values(const Parameter& p, std::uint64_t seed, std::uint64_t offset, float* dst,
                 std::size_t n);

}  // namespace strata::nn
