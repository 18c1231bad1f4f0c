// Harness cases of the optimizer updates: AdamW and SGD with f32 and 16-bit gradients, with and
// without the 16-bit parameter copy (checked equal to the reference's master rounded once).
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

constexpr std::int64_t kN = 1003;  // not a multiple of any vector width

// The gradient in each float dtype ('p') with the copy ('h') in each 16-bit one.
std::vector<Combo> param16_combos() {
  std::vector<Combo> out;
  for (DType grad : {DType::f32, DType::bf16, DType::f16})
    for (DType copy : {DType::bf16, DType::f16})
      out.push_back(
          {"grad_" + std::string(dtype_name(grad)) + "_copy_" + std::string(dtype_name(copy)),
           {{'p', grad}, {'h', copy}}});
  return out;
}

optim::AdamWHyper adamw_hyper() {
  optim::AdamWHyper h;
  h.lr = 1e-2;
  h.weight_decay = 0.1;
  return h;
}

OpCase adamw_case(bool copy) {
  OpCase c;
  c.name = copy ? "adamw_step_param16" : "adamw_step";
  c.tensors = {
      {"master", Shape{kN}, 'f', normal()},       // 0
      {"grad", Shape{kN}, 'p', normal(0.1)},      // 1
      {"m", Shape{kN}, 'f', normal(0.01)},        // 2
      {"v", Shape{kN}, 'f', uniform(0.0, 1e-3)},  // 3
  };
  if (copy) {
    c.tensors.push_back({"param16", Shape{kN}, 'h', unset(), /*copy_of=*/0});
    c.calls.push_back(effect("adamw_step", {0, 1, 2, 3, 4}, {0, 2, 3, 4}, [](const Tensors& t) {
      adamw_step(t[0], t[1], t[2], t[3], adamw_hyper(), 3, 0.5f, t[4]);
    }));
    c.combos = param16_combos();
  } else {
    c.calls.push_back(effect("adamw_step", {0, 1, 2, 3}, {0, 2, 3}, [](const Tensors& t) {
      adamw_step(t[0], t[1], t[2], t[3], adamw_hyper(), 3, 0.5f, Tensor());
    }));
  }
  return c;
}

// With momentum, dampening and weight decay at step 2 (the buffer is read); plain SGD with the
// copy.
OpCase sgd_case(bool copy) {
  OpCase c;
  c.name = copy ? "sgd_step_param16" : "sgd_step";
  c.tensors = {
      {"master", Shape{kN}, 'f', normal()},   // 0
      {"grad", Shape{kN}, 'p', normal(0.1)},  // 1
  };
  if (copy) {
    c.tensors.push_back({"param16", Shape{kN}, 'h', unset(), /*copy_of=*/0});  // 2
    c.calls.push_back(effect("sgd_step", {0, 1, 2}, {0, 2}, [](const Tensors& t) {
      optim::SGDHyper h;
      h.lr = 0.05;
      sgd_step(t[0], t[1], Tensor(), h, 1, 0.5f, t[2]);
    }));
    c.combos = param16_combos();
  } else {
    c.tensors.push_back({"momentum", Shape{kN}, 'f', normal(0.1)});  // 2
    c.calls.push_back(effect("sgd_step", {0, 1, 2}, {0, 2}, [](const Tensors& t) {
      optim::SGDHyper h;
      h.lr = 0.05;
      h.momentum = 0.9;
      h.dampening = 0.1;
      h.weight_decay = 0.01;
      sgd_step(t[0], t[1], t[2], h, 2, 0.5f, Tensor());
    }));
  }
  return c;
}

}  // namespace

std::vector<OpCase> optimizer_cases() {
  return {adamw_case(false), adamw_case(true), sgd_case(false), sgd_case(true)};
}

}  // namespace strata::ops::test
