#include "framework/nn/module.hpp"

namespace strata::nn {

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (auto& p : params_) out.push_back(p.get());
  for (auto* c : children_) {
    auto sub = c->parameters();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

void Module::save(Context& ctx, std::vector<Tensor> tensors, std::vector<std::int64_t> ints) const {
  if (!ctx.grad_enabled) return;
  ctx.saved->put(this, SavedState::Entry{std::move(tensors), std::move(ints)});
}

SavedState::Entry Module::restore(Context& ctx) const {
  return ctx.saved->take(this, prefix_.empty() ? std::string_view("model") : std::string_view(prefix_));
}

Parameter& Module::declare(const std::string& local_name, Shape shape, Init init, bool decay) {
  auto p = std::make_unique<Parameter>();
  p->name = child_name(local_name);
  p->shape = std::move(shape);
  p->init = init;
  p->decay = decay;
  params_.push_back(std::move(p));
  return *params_.back();
}

}  // namespace strata::nn
