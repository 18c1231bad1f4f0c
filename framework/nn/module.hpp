// Module: a layer with explicit forward/backward that declares its parameters (and children's)
// under dotted global names. The backward rule of each layer sits next to its forward; what
// forward keeps for it goes into the context's SavedState, never into members.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/nn/context.hpp"
#include "framework/nn/parameter.hpp"

namespace strata::nn {

class Module {
 public:
  explicit Module(std::string prefix) : prefix_(std::move(prefix)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& prefix() const { return prefix_; }
  // This module's parameters and its children's, in declaration order.
  std::vector<Parameter*> parameters();

 protected:
  Parameter& declare(const std::string& local_name, Shape shape, Init init, bool decay);
  void add_child(Module& child) { children_.push_back(&child); }
  std::string child_name(const std::string& local) const {
    return prefix_.empty() ? local : prefix_ + "." + local;
  }
  // Keeps tensors (and integers) for this module's backward in ctx's saved state; nothing when
  // ctx.grad_enabled is false (evaluation).
  void save(Context& ctx, std::vector<Tensor> tensors, std::vector<std::int64_t> ints = {}) const;
  // Takes them back (once); throws when forward saved nothing.
  SavedState::Entry restore(Context& ctx) const;

 private:
  std::string prefix_;
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<Module*> children_;
};

}  // namespace strata::nn
