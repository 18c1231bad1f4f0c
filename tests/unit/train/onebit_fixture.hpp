// What the 1-bit optimizer tests (test_onebit_adam.cpp, test_onebit_lamb.cpp) share: three
// parameters in two units (a matrix and a vector without weight decay, then a second matrix),
// and the stand-in for the compressed exchange, which transforms what it is given
// deterministically as the real one would.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "framework/nn/parameter.hpp"

namespace strata::train::onebit_test {

struct Params {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  std::vector<std::vector<nn::Parameter*>> units;
  Params() {
    auto add = [&](std::size_t unit, const char* name, Shape shape, bool decay) {
      auto p = std::make_unique<nn::Parameter>();
      p->name = name;
      p->shape = std::move(shape);
      p->decay = decay;
      if (units.size() <= unit) units.resize(unit + 1);
      units[unit].push_back(p.get());
      owned.push_back(std::move(p));
    };
    add(0, "W", Shape{6, 10}, true);
    add(0, "b", Shape{10}, false);  // no weight decay on vectors, as AdamW
    add(1, "E", Shape{13, 4}, true);
  }
};

// Element i of a tensor handed to the exchange becomes 0.5·x + 0.001·(i mod 7).
inline float exchanged(float x, std::size_t i) {
  return 0.5f * x + 0.001f * static_cast<float>(i % 7);
}

}  // namespace strata::train::onebit_test
