// Shared helpers for tests that compare Strata's GPT with the PyTorch fixture.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "tests/support/fixture.hpp"

namespace strata::test {

inline const Fixture& gpt_fixture() {
  static Fixture fx = Fixture::load(std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/gpt_tiny.fx");
  return fx;
}

inline nn::GptConfig fixture_gpt_config(const Fixture& fx) {
  nn::GptConfig c;
  c.vocab_size = static_cast<int>(fx.scalar("config/vocab_size"));
  c.block_size = static_cast<int>(fx.scalar("config/block_size"));
  c.n_layer = static_cast<int>(fx.scalar("config/n_layer"));
  c.n_head = static_cast<int>(fx.scalar("config/n_head"));
  c.n_embd = static_cast<int>(fx.scalar("config/n_embd"));
  return c;
}

// Copies the fixture's tensors `prefix + name` into every parameter of the store.
inline void load_params(const Fixture& fx, nn::ParamStore& store, const std::string& prefix = "") {
  for (auto* p : store.parameters()) {
    auto v = fx.f32(prefix + p->name);
    if (static_cast<std::int64_t>(v.size()) != p->shape.numel())
      throw std::runtime_error("fixture size mismatch for " + p->name);
    Tensor src(Storage::wrap(v.data(), v.size() * 4, Device::cpu()), DType::f32, p->shape,
               p->shape.contiguous_strides());
    p->value.copy_from(src);
  }
}

// max |a - b| / max |b|: relative error in the max norm.
inline double rel_max_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

}  // namespace strata::test
