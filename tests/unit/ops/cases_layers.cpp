// Harness cases of the layers' ops: LayerNorm, GELU (dx aliasing dy too), causal attention and the
// token + position embedding, each forward and backward.
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

constexpr float kEps = 1e-5f;

OpCase layernorm_case() {
  OpCase c;
  c.name = "layernorm";
  const std::int64_t N = 6, C = 37;
  c.tensors = {
      {"x", Shape{N, C}, 'a', normal(2.0, 3.0)},  // 0 (a non-zero mean)
      {"w", Shape{C}, 'p', normal(0.5, 1.0)},     // 1
      {"b", Shape{C}, 'p', normal(0.5)},          // 2
      {"y", Shape{N, C}, 'a', unset()},           // 3
      {"mean", Shape{N}, 'f', unset()},           // 4
      {"rstd", Shape{N}, 'f', unset()},           // 5
      {"dy", Shape{N, C}, 'a', normal()},         // 6
      {"saved_mean", Shape{N}, 'f', unset()},     // 7 (prepared)
      {"saved_rstd", Shape{N}, 'f', unset()},     // 8 (prepared)
      {"dx", Shape{N, C}, 'a', unset()},          // 9
      {"dw", Shape{C}, 'p', normal()},            // 10 accumulated
      {"db", Shape{C}, 'p', normal()},            // 11 accumulated
  };
  c.prepare = [](const Tensors& t) {
    layernorm_forward(t[0], t[1], t[2], Tensor::empty(t[0].shape(), DType::f32), t[7], t[8], kEps);
  };
  c.calls.push_back(effect(
      "layernorm_forward", {0, 1, 2, 3, 4, 5}, {3, 4, 5},
      [](const Tensors& t) { layernorm_forward(t[0], t[1], t[2], t[3], t[4], t[5], kEps); }));
  c.calls.push_back(
      effect("layernorm_backward", {6, 0, 1, 7, 8, 9, 10, 11}, {9, 10, 11}, [](const Tensors& t) {
        layernorm_backward(t[6], t[0], t[1], t[7], t[8], t[9], t[10], t[11]);
      }));
  return c;
}

// 20000 elements: more than one of the 16384-element chunks the 16-bit path widens at a time.
// Groups: x, the outputs y and dx ('o'), dy ('d') — every mix of dtypes.
OpCase gelu_case() {
  const Shape s{40, 500};
  const Init x = planted(
      normal(3.0),
      {{0, 0.0f}, {1, -0.0f}, {2, 10.0f}, {3, -10.0f}, {4, 50.0f}, {5, -50.0f}, {19999, 1e-3f}});
  return op_case(
      "gelu",
      {{"x", s, 'x', x}, {"y", s, 'o', unset()}, {"dy", s, 'd', normal()}, {"dx", s, 'o', unset()}},
      {effect("gelu_forward", {0, 1}, {1}, [](const Tensors& t) { gelu_forward(t[0], t[1]); }),
       effect("gelu_backward", {0, 2, 3}, {3},
              [](const Tensors& t) { gelu_backward(t[0], t[2], t[3]); })},
      product_combos("xod"));
}

OpCase gelu_inplace_case() {
  const Shape s{40, 500};
  return op_case("gelu_backward_dx_is_dy", {{"x", s, 'x', normal(3.0)}, {"dy", s, 'd', normal()}},
                 {effect("gelu_backward", {0, 1}, {1},
                         [](const Tensors& t) { gelu_backward(t[0], t[1], t[1]); })},
                 product_combos("xd"));
}

// T = 70 spans two of the kernel's 64-row query blocks; head size 4.
OpCase attention_case() {
  OpCase c;
  c.name = "attention";
  const std::int64_t B = 2, T = 70, C = 12;
  const int NH = 3;
  c.tensors = {
      {"qkv", Shape{B, T, 3 * C}, 'a', normal()},      // 0
      {"out", Shape{B, T, C}, 'a', unset()},           // 1
      {"lse", Shape{B * NH * T}, 'f', unset()},        // 2
      {"saved_out", Shape{B, T, C}, 'a', unset()},     // 3 (prepared)
      {"saved_lse", Shape{B * NH * T}, 'f', unset()},  // 4 (prepared)
      {"dout", Shape{B, T, C}, 'a', normal()},         // 5
      {"dqkv", Shape{B, T, 3 * C}, 'a', unset()},      // 6
  };
  c.prepare = [NH](const Tensors& t) { attention_forward(t[0], t[3], t[4], NH); };
  c.calls.push_back(effect("attention_forward", {0, 1, 2}, {1, 2},
                           [NH](const Tensors& t) { attention_forward(t[0], t[1], t[2], NH); }));
  c.calls.push_back(effect("attention_backward", {0, 3, 4, 5, 6}, {6}, [NH](const Tensors& t) {
    attention_backward(t[0], t[3], t[4], t[5], t[6], NH);
  }));
  return c;
}

// V = 11 tokens over 15 positions (repeats); wpe has a row more than T needs.
OpCase embedding_case() {
  OpCase c;
  c.name = "embedding";
  const std::int64_t B = 3, T = 5, C = 8, V = 11;
  c.tensors = {
      {"tokens", Shape{B, T}, 'i', tokens(V)},        // 0
      {"wte", Shape{V, C}, 'p', normal()},            // 1
      {"wpe", Shape{T + 1, C}, 'p', normal()},        // 2
      {"out", Shape{B * T, C}, 'a', unset()},         // 3
      {"dout", Shape{B * T, C}, 'a', normal()},       // 4
      {"dwte", Shape{V, C}, 'p', normal()},           // 5 accumulated
      {"dwpe", Shape{T + 1, C}, 'p', normal()},       // 6 accumulated
      {"dwte_only", Shape{V, C}, 'p', normal()},      // 7
      {"dwpe_only", Shape{T + 1, C}, 'p', normal()},  // 8
  };
  c.calls.push_back(effect("embedding_forward", {0, 1, 2, 3}, {3},
                           [](const Tensors& t) { embedding_forward(t[0], t[1], t[2], t[3]); }));
  c.calls.push_back(effect("embedding_backward", {0, 4, 5, 6}, {5, 6},
                           [](const Tensors& t) { embedding_backward(t[0], t[4], t[5], t[6]); }));
  c.calls.push_back(effect("embedding_backward", {0, 4, 7}, {7}, [](const Tensors& t) {
    embedding_backward(t[0], t[4], t[7], Tensor());
  }));
  c.calls.push_back(effect("embedding_backward", {0, 4, 8}, {8}, [](const Tensors& t) {
    embedding_backward(t[0], t[4], Tensor(), t[8]);
  }));
  return c;
}

// A GPT-sized row (C = 768: 24 columns per lane of the CUDA kernels' warp per row) over 300 rows:
// several of the CUDA dw/db reduction's 32-row strips, the last one partial, and a row count
// that is not a multiple of the 8 rows a block takes.
OpCase layernorm_wide_case() {
  OpCase c;
  c.name = "layernorm_c768";
  c.large = true;  // the small "layernorm" case covers the argument checks
  const std::int64_t N = 300, C = 768;
  c.tensors = {
      {"x", Shape{N, C}, 'a', normal(2.0, 3.0)},  // 0
      {"w", Shape{C}, 'p', normal(0.5, 1.0)},     // 1
      {"b", Shape{C}, 'p', normal(0.5)},          // 2
      {"y", Shape{N, C}, 'a', unset()},           // 3
      {"mean", Shape{N}, 'f', unset()},           // 4
      {"rstd", Shape{N}, 'f', unset()},           // 5
      {"dy", Shape{N, C}, 'a', normal()},         // 6
      {"saved_mean", Shape{N}, 'f', unset()},     // 7 (prepared)
      {"saved_rstd", Shape{N}, 'f', unset()},     // 8 (prepared)
      {"dx", Shape{N, C}, 'a', unset()},          // 9
      {"dw", Shape{C}, 'p', normal()},            // 10 accumulated
      {"db", Shape{C}, 'p', normal()},            // 11 accumulated
  };
  c.prepare = [](const Tensors& t) {
    layernorm_forward(t[0], t[1], t[2], Tensor::empty(t[0].shape(), DType::f32), t[7], t[8], kEps);
  };
  c.calls.push_back(effect(
      "layernorm_forward", {0, 1, 2, 3, 4, 5}, {3, 4, 5},
      [](const Tensors& t) { layernorm_forward(t[0], t[1], t[2], t[3], t[4], t[5], kEps); }));
  c.calls.push_back(
      effect("layernorm_backward", {6, 0, 1, 7, 8, 9, 10, 11}, {9, 10, 11}, [](const Tensors& t) {
        layernorm_backward(t[6], t[0], t[1], t[7], t[8], t[9], t[10], t[11]);
      }));
  return c;
}

// Many repeats of few tokens (V = 7 over 200 positions: about 29 positions a token, so the
// backward's per-token sums are long), C = 300 (more than one 256-channel tile of the CUDA dwte
// kernel, the second partial), and a vocabulary-parallel slice [3, 6) of the same table: tokens
// of other slices add nothing, wpe is left out.
OpCase embedding_repeats_case() {
  OpCase c;
  c.name = "embedding_repeats";
  c.large = true;  // the small "embedding" case covers the argument checks
  const std::int64_t B = 4, T = 50, C = 300, V = 7, S = 3;  // the slice: rows [3, 6)
  c.tensors = {
      {"tokens", Shape{B, T}, 'i', tokens(V)},       // 0
      {"wte", Shape{V, C}, 'p', normal()},           // 1
      {"wpe", Shape{T, C}, 'p', normal()},           // 2
      {"out", Shape{B * T, C}, 'a', unset()},        // 3
      {"dout", Shape{B * T, C}, 'a', normal()},      // 4
      {"dwte", Shape{V, C}, 'p', normal()},          // 5 accumulated
      {"dwpe", Shape{T, C}, 'p', normal()},          // 6 accumulated
      {"wte_slice", Shape{S, C}, 'p', normal()},     // 7
      {"out_slice", Shape{B * T, C}, 'a', unset()},  // 8
      {"dwte_slice", Shape{S, C}, 'p', normal()},    // 9 accumulated
  };
  c.calls.push_back(effect("embedding_forward", {0, 1, 2, 3}, {3},
                           [](const Tensors& t) { embedding_forward(t[0], t[1], t[2], t[3]); }));
  c.calls.push_back(effect("embedding_backward", {0, 4, 5, 6}, {5, 6},
                           [](const Tensors& t) { embedding_backward(t[0], t[4], t[5], t[6]); }));
  c.calls.push_back(effect("embedding_forward", {0, 7, 8}, {8}, [](const Tensors& t) {
    embedding_forward(t[0], t[7], Tensor(), t[8], 3);
  }));
  c.calls.push_back(effect("embedding_backward", {0, 4, 9}, {9}, [](const Tensors& t) {
    embedding_backward(t[0], t[4], t[9], Tensor(), 3);
  }));
  return c;
}

}  // namespace

std::vector<OpCase> layer_cases() {
  return {layernorm_case(), layernorm_wide_case(), gelu_case(),     gelu_inplace_case(),
          attention_case(), embedding_case(),      embedding_repeats_case()};
}

}  // namespace strata::ops::test
