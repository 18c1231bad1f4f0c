// Harness cases of causal attention beyond cases_layers.cpp's small one (head size 4, T = 70): the
// head sizes the CUDA kernels pad to each of their templates (16, 32, 64, 128, and sizes between),
// T not a multiple of any tile and T a multiple of all of them, T = 1, head size 1, and operands
// of different dtypes in one call. Each is a forward and a backward; the CPU reference stays fast
// (a few million flops per call). The rounded cases run with strata.allow_rounded_attention on:
// the tensor-core kernels (16-bit qkv and dout on a GPU) round P and dS to 16 bits once, within
// the tolerance that allows (tests/cuda_emu/test_attention.cpp shows the rounding happens).
#include <string>

#include "framework/backend/math_mode.hpp"
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

// The dtype groups of the tensors: qkv, out (and the saved out), dout, dqkv. The standard
// combinations name only 'a', so cases that use them put all four in group 'a'; the mixed case
// gives each its own ('q', 'o', 'g', 'd').
struct AttentionGroups {
  char q = 'a', o = 'a', g = 'a', d = 'a';
};

// Forward into out and lse, backward from the saved out and lse (prepared by the CPU forward on
// the f32 values) into dqkv. C = NH * hs.
OpCase attention_sized(const std::string& name, std::int64_t B, std::int64_t T, int NH, int hs,
                       AttentionGroups gr = {}, std::vector<Combo> combos = {}) {
  OpCase c;
  c.name = name;
  const std::int64_t C = static_cast<std::int64_t>(NH) * hs;
  c.tensors = {
      {"qkv", Shape{B, T, 3 * C}, gr.q, normal()},     // 0
      {"out", Shape{B, T, C}, gr.o, unset()},          // 1
      {"lse", Shape{B * NH * T}, 'f', unset()},        // 2
      {"saved_out", Shape{B, T, C}, gr.o, unset()},    // 3 (prepared)
      {"saved_lse", Shape{B * NH * T}, 'f', unset()},  // 4 (prepared)
      {"dout", Shape{B, T, C}, gr.g, normal()},        // 5
      {"dqkv", Shape{B, T, 3 * C}, gr.d, unset()},     // 6
  };
  c.prepare = [NH](const Tensors& t) { attention_forward(t[0], t[3], t[4], NH); };
  c.calls.push_back(effect("attention_forward", {0, 1, 2}, {1, 2},
                           [NH](const Tensors& t) { attention_forward(t[0], t[1], t[2], NH); }));
  c.calls.push_back(effect("attention_backward", {0, 3, 4, 5, 6}, {6}, [NH](const Tensors& t) {
    attention_backward(t[0], t[3], t[4], t[5], t[6], NH);
  }));
  c.combos = std::move(combos);
  c.large = T > 64;  // crosses the CPU kernel's 64-row blocks (and the CUDA kernels' tiles)
  return c;
}

// attention_sized's case with strata.allow_rounded_attention on during its calls. The emulator
// measured at most 2.0e-3 (bf16) and 2.7e-4 (f16) of the largest reference value.
OpCase attention_rounded(const std::string& name, std::int64_t B, std::int64_t T, int NH, int hs) {
  OpCase c = attention_sized(name, B, T, NH, hs);
  for (Call& call : c.calls) {
    call.run = [run = call.run](const Tensors& t) {
      const MathModeGuard rounded(allow_tf32(), true);
      return run(t);
    };
    call.tol.other_rtol = 2e-2;  // the CPU computes as without the mode: bitwise still
  }
  return c;
}

// Each of qkv, out, dout, dqkv in each float dtype across three combinations, never all alike.
std::vector<Combo> attention_mixed_combos() {
  const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
  return {{"q_bf16_o_f16_g_f32_d_bf16", {{'q', bf16}, {'o', f16}, {'g', f32}, {'d', bf16}}},
          {"q_f16_o_f32_g_bf16_d_f16", {{'q', f16}, {'o', f32}, {'g', bf16}, {'d', f16}}},
          {"q_f32_o_bf16_g_f16_d_f32", {{'q', f32}, {'o', bf16}, {'g', f16}, {'d', f32}}}};
}

}  // namespace

std::vector<OpCase> attention_cases() {
  return {
      // GPT-2's head size; T = 200 is no multiple of the 64- and 32-row tiles (tails everywhere).
      attention_sized("attention_hs64", 1, 200, 2, 64),
      // T a multiple of every tile: no tail, the diagonal tile exactly square.
      attention_sized("attention_hs64_full_tiles", 2, 128, 2, 64),
      attention_sized("attention_hs32", 2, 77, 3, 32),
      // The largest head size, with the smallest tiles (16 and 32 rows).
      attention_sized("attention_hs128", 1, 150, 1, 128),
      // Head sizes between the padded ones (zero-padded columns).
      attention_sized("attention_hs48", 2, 65, 2, 48),
      attention_sized("attention_hs100", 1, 70, 2, 100),
      attention_sized("attention_hs1", 2, 20, 2, 1),
      attention_sized("attention_t1", 3, 1, 2, 8),
      attention_sized("attention_mixed_dtypes", 2, 37, 2, 24, AttentionGroups{'q', 'o', 'g', 'd'},
                      attention_mixed_combos()),
      // GPT-2's head size and T past three 64-row tiles; head size 128 with a tail.
      attention_rounded("attention_rounded_hs64", 1, 200, 2, 64),
      attention_rounded("attention_rounded_hs128", 1, 70, 1, 128),
  };
}

}  // namespace strata::ops::test
