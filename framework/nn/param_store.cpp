#include "framework/nn/param_store.hpp"

#include <vector>

#include "framework/core/convert.hpp"

namespace strata::nn {

ParamStore::ParamStore(std::vector<std::vector<Parameter*>> units, const ParamStoreOptions& opts)
    : opts_(opts) {
  STRATA_CHECK(opts.pad_multiple >= 1, "nn", "pad_multiple must be >= 1, got {}", opts.pad_multiple);
  for (auto& unit : units) {
    UnitLayout l;
    l.params = unit;
    for (auto* p : unit) {
      l.offsets.push_back(l.numel);
      l.numel += p->shape.numel();
    }
    l.padded = (l.numel + opts.pad_multiple - 1) / opts.pad_multiple * opts.pad_multiple;
    Tensor v = Tensor::zeros(Shape{l.padded}, opts.param_dtype, opts.memory.with(Category::params));
    Tensor g = Tensor::zeros(Shape{l.padded}, opts.grad_dtype, opts.memory.with(Category::grads));
    for (std::size_t i = 0; i < unit.size(); ++i) {
      Parameter* p = unit[i];
      const std::int64_t n = p->shape.numel();
      p->value = v.slice(0, l.offsets[i], l.offsets[i] + n).view(p->shape);
      p->grad = g.slice(0, l.offsets[i], l.offsets[i] + n).view(p->shape);
    }
    layouts_.push_back(std::move(l));
    values_.push_back(std::move(v));
    grads_.push_back(std::move(g));
  }
}

void ParamStore::initialize(std::uint64_t seed) {
  std::vector<float> tmp;
  for (auto& l : layouts_) {
    for (auto* p : l.params) {
      const auto n = static_cast<std::size_t>(p->shape.numel());
      if (p->value.dtype() == DType::f32) {
        init_values(*p, seed, 0, p->value.data<float>(), n);
      } else {
        tmp.resize(n);
        init_values(*p, seed, 0, tmp.data(), n);
        convert(tmp.data(), DType::f32, p->value.raw(), p->value.dtype(), n);
      }
    }
  }
}

void ParamStore::zero_grads() {
  for (auto& g : grads_) g.zero();
}

std::int64_t ParamStore::total_numel() const {
  std::int64_t n = 0;
  for (auto& l : layouts_) n += l.numel;
  return n;
}

std::vector<Parameter*> ParamStore::parameters() const {
  std::vector<Parameter*> out;
  for (auto& l : layouts_) out.insert(out.end(), l.params.begin(), l.params.end());
  return out;
}

Parameter* ParamStore::find(const std::string& name) const {
  for (auto& l : layouts_)
    for (auto* p : l.params)
      if (p->name == name) return p;
  return nullptr;
}

}  // namespace strata::nn
