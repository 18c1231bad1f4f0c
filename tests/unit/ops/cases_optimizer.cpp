// Harness cases of the optimizer updates: AdamW and SGD with f32 and 16-bit gradients, with and
// without the 16-bit parameter copy (checked equal to the reference's master rounded once); both
// of AdamW's lerp forms, Nesterov on the first step, and buffers large enough that the CUDA
// kernels' grid-stride loops (at most 2048 blocks of 256 threads) take a second iteration.
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

constexpr std::int64_t kN = 1003;  // not a multiple of any vector width
// More elements than the CUDA update kernels' largest grid has threads (2048 x 256), with a tail.
constexpr std::int64_t kLargeN = 2048 * 256 + 777;

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

// A case of update `op` on `tensors` (the master first); with `copy`, a param16 copy of the
// master is appended, passed to the update, and the case runs in every gradient and copy dtype.
// The case is named op + variant (+ "_param16" with the copy).
OpCase update_case(const std::string& op, bool copy, std::vector<Spec> tensors,
                   std::vector<int> outputs, std::function<void(const Tensors&, Tensor)> step,
                   const std::string& variant = "") {
  std::vector<int> args;
  for (std::size_t i = 0; i < tensors.size(); ++i) args.push_back(static_cast<int>(i));
  std::vector<Combo> combos;
  if (copy) {
    args.push_back(static_cast<int>(tensors.size()));
    outputs.push_back(args.back());
    const Shape shape = tensors.front().shape;
    tensors.push_back({"param16", shape, 'h', unset(), /*copy_of=*/0});
    combos = param16_combos();
  }
  Call call = effect(op, args, std::move(outputs),
                     [step, copy](const Tensors& t) { step(t, copy ? t.back() : Tensor()); });
  return op_case(op + variant + (copy ? "_param16" : ""), std::move(tensors), {std::move(call)},
                 std::move(combos));
}

OpCase adamw_case(bool copy) {
  return update_case("adamw_step", copy,
                     {{"master", Shape{kN}, 'f', normal()},
                      {"grad", Shape{kN}, 'p', normal(0.1)},
                      {"m", Shape{kN}, 'f', normal(0.01)},
                      {"v", Shape{kN}, 'f', uniform(0.0, 1e-3)}},
                     {0, 2, 3}, [](const Tensors& t, const Tensor& param16) {
                       adamw_step(t[0], t[1], t[2], t[3], adamw_hyper(), 3, 0.5f, param16);
                     });
}

// With momentum, dampening and weight decay at step 2 (the buffer is read); plain SGD with the
// copy.
OpCase sgd_case(bool copy) {
  std::vector<Spec> tensors = {{"master", Shape{kN}, 'f', normal()},
                               {"grad", Shape{kN}, 'p', normal(0.1)}};
  if (copy)
    return update_case("sgd_step", true, tensors, {0}, [](const Tensors& t, const Tensor& p16) {
      optim::SGDHyper h;
      h.lr = 0.05;
      sgd_step(t[0], t[1], Tensor(), h, 1, 0.5f, p16);
    });
  tensors.push_back({"momentum", Shape{kN}, 'f', normal(0.1)});
  return update_case("sgd_step", false, tensors, {0, 2}, [](const Tensors& t, const Tensor&) {
    optim::SGDHyper h;
    h.lr = 0.05;
    h.momentum = 0.9;
    h.dampening = 0.1;
    h.weight_decay = 0.01;
    sgd_step(t[0], t[1], t[2], h, 2, 0.5f, Tensor());
  });
}

// 1 - beta1 >= 0.5 (lerp's other form), no bias correction, on kLargeN elements with the copy.
OpCase adamw_large_case() {
  OpCase c = update_case(
      "adamw_step", true,
      {{"master", Shape{kLargeN}, 'f', normal()},
       {"grad", Shape{kLargeN}, 'p', normal(0.1)},
       {"m", Shape{kLargeN}, 'f', normal(0.01)},
       {"v", Shape{kLargeN}, 'f', uniform(0.0, 1e-3)}},
      {0, 2, 3},
      [](const Tensors& t, const Tensor& param16) {
        optim::AdamWHyper h;
        h.lr = 2e-3;
        h.beta1 = 0.3;
        h.beta2 = 0.95;
        h.weight_decay = 0.1;
        h.bias_correction = false;
        adamw_step(t[0], t[1], t[2], t[3], h, 5, 1.0f / 3.0f, param16);
      },
      "_large_lerp_w");
  c.large = true;
  return c;
}

// Nesterov with weight decay on the first step: the buffer (NaN) must not be read, only set.
OpCase sgd_nesterov_first_case() {
  return update_case("sgd_step", true,
                     {{"master", Shape{kN}, 'f', normal()},
                      {"grad", Shape{kN}, 'p', normal(0.1)},
                      {"momentum", Shape{kN}, 'f', unset()}},
                     {0, 2},
                     [](const Tensors& t, const Tensor& param16) {
                       optim::SGDHyper h;
                       h.lr = 0.05;
                       h.momentum = 0.8;
                       h.weight_decay = 0.1;
                       h.nesterov = true;
                       sgd_step(t[0], t[1], t[2], h, 1, 0.25f, param16);
                     },
                     "_nesterov_first");
}

// Momentum with dampening past the first step, on kLargeN elements with the copy.
OpCase sgd_large_case() {
  OpCase c = update_case("sgd_step", true,
                         {{"master", Shape{kLargeN}, 'f', normal()},
                          {"grad", Shape{kLargeN}, 'p', normal(0.1)},
                          {"momentum", Shape{kLargeN}, 'f', normal(0.1)}},
                         {0, 2},
                         [](const Tensors& t, const Tensor& param16) {
                           optim::SGDHyper h;
                           h.lr = 0.1;
                           h.momentum = 0.9;
                           h.dampening = 0.5;
                           h.weight_decay = 0.01;
                           sgd_step(t[0], t[1], t[2], h, 3, 1.0f, param16);
                         },
                         "_large");
  c.large = true;
  return c;
}

optim::LionHyper lion_hyper() {
  optim::LionHyper h;
  h.lr = 1e-2;
  h.beta1 = 0.9;
  h.beta2 = 0.98;
  h.weight_decay = 0.1;
  return h;
}

OpCase lion_case(bool copy) {
  return update_case("lion_step", copy,
                     {{"master", Shape{kN}, 'f', normal()},
                      {"grad", Shape{kN}, 'p', normal(0.1)},
                      {"m", Shape{kN}, 'f', normal(0.01)}},
                     {0, 2}, [](const Tensors& t, const Tensor& param16) {
                       lion_step(t[0], t[1], t[2], lion_hyper(), 3, 0.5f, param16);
                     });
}

// The 8-bit updates over three quantization blocks and a tail, from random codes and absmax,
// with decay runs whose edges fall inside blocks (a one-element run among them).
constexpr std::int64_t kQ8N = 3 * 2048 + 517;
const std::vector<optim::DecayRun>& q8_runs() {
  static const std::vector<optim::DecayRun> r = {
      {0, 7, false}, {7, 8, true}, {8, 2100, false}, {2100, 4095, true},
      {4095, 6000, false}, {6000, static_cast<std::size_t>(kQ8N), true}};
  return r;
}
constexpr std::int64_t kQ8Blocks = (kQ8N + 2047) / 2048;

OpCase adamw8bit_case(bool copy) {
  return update_case("adamw8bit_step", copy,
                     {{"master", Shape{kQ8N}, 'f', normal()},
                      {"grad", Shape{kQ8N}, 'p', normal(0.1)},
                      {"m_codes", Shape{kQ8N}, 'u', tokens(256)},
                      {"v_codes", Shape{kQ8N}, 'u', tokens(256)},
                      {"m_absmax", Shape{kQ8Blocks}, 'f', uniform(0.0, 0.05)},
                      {"v_absmax", Shape{kQ8Blocks}, 'f', uniform(0.0, 1e-3)}},
                     {0, 2, 3, 4, 5}, [](const Tensors& t, const Tensor& param16) {
                       adamw8bit_step(t[0], t[1], t[2], t[3], t[4], t[5], q8_runs(),
                                      adamw_hyper(), 3, 0.5f, param16);
                     });
}

OpCase lion8bit_case(bool copy) {
  return update_case("lion8bit_step", copy,
                     {{"master", Shape{kQ8N}, 'f', normal()},
                      {"grad", Shape{kQ8N}, 'p', normal(0.1)},
                      {"m_codes", Shape{kQ8N}, 'u', tokens(256)},
                      {"m_absmax", Shape{kQ8Blocks}, 'f', uniform(0.0, 0.05)}},
                     {0, 2, 3}, [](const Tensors& t, const Tensor& param16) {
                       lion8bit_step(t[0], t[1], t[2], t[3], q8_runs(), lion_hyper(), 2, 0.25f,
                                     param16);
                     });
}

}  // namespace

std::vector<OpCase> optimizer_cases() {
  return {adamw_case(false),        adamw_case(true), sgd_case(false),  sgd_case(true),
          adamw_large_case(),       sgd_nesterov_first_case(),          sgd_large_case(),
          lion_case(false),         lion_case(true),  adamw8bit_case(false), adamw8bit_case(true),
          lion8bit_case(false),     lion8bit_case(true)};
}

}  // namespace strata::ops::test
