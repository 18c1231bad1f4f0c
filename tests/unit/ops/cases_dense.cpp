// Harness cases of the dense algebra: matmul (every transpose, alpha/beta, each operand 16-bit in
// turn, the CPU table's row-blocked and K-blocked paths) and linear forward/backward.
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

// f32, then each of A, B, C 16-bit in turn and all three, for bf16 and f16.
std::vector<Combo> matmul_combos() {
  std::vector<Combo> out{{"f32", {}}};
  for (DType dt : {DType::bf16, DType::f16}) {
    const std::string n(dtype_name(dt));
    out.push_back({"A_" + n, {{'A', dt}}});
    out.push_back({"B_" + n, {{'B', dt}}});
    out.push_back({"C_" + n, {{'C', dt}}});
    out.push_back({n, {{'A', dt}, {'B', dt}, {'C', dt}}});
  }
  return out;
}

struct AlphaBeta {
  float alpha, beta;
};

// C_k = alpha_k op(A) op(B) + beta_k C_k for each (alpha, beta), each into its own C.
OpCase matmul_case(const std::string& name, int M, int N, int K, bool ta, bool tb,
                   std::vector<AlphaBeta> ab, double rtol, bool large) {
  OpCase c;
  c.name = name;
  c.large = large;
  c.tensors.push_back({"A", ta ? Shape{K, M} : Shape{M, K}, 'A', normal(0.5)});
  c.tensors.push_back({"B", tb ? Shape{N, K} : Shape{K, N}, 'B', normal(0.5)});
  for (std::size_t k = 0; k < ab.size(); ++k) {
    const int ci = static_cast<int>(c.tensors.size());
    c.tensors.push_back(
        {fmt::format("C{}", k), Shape{M, N}, 'C', ab[k].beta == 0.0f ? unset() : normal(1.0)});
    Call call = effect("matmul", {0, 1, ci}, {ci}, [=, v = ab[k]](const Tensors& t) {
      matmul(t[0], t[1], t[static_cast<std::size_t>(ci)], ta, tb, v.alpha, v.beta);
    });
    call.tol.rtol = rtol;
    c.calls.push_back(std::move(call));
  }
  c.combos = matmul_combos();
  return c;
}

OpCase linear_case(bool bias) {
  // N=7 rows, in=13, out=9.
  OpCase c;
  c.name = bias ? "linear" : "linear_no_bias_no_dx";
  c.tensors = {
      {"x", Shape{7, 13}, 'a', normal()},     // 0
      {"W", Shape{9, 13}, 'p', normal(0.3)},  // 1
      {"b", Shape{9}, 'p', normal()},         // 2
      {"y", Shape{7, 9}, 'a', unset()},       // 3
      {"dy", Shape{7, 9}, 'a', normal()},     // 4
      {"dx", Shape{7, 13}, 'a', unset()},     // 5
      {"dW", Shape{9, 13}, 'p', normal()},    // 6 accumulated
      {"db", Shape{9}, 'p', normal()},        // 7 accumulated
  };
  if (bias) {
    c.calls.push_back(effect("linear_forward", {0, 1, 2, 3}, {3},
                             [](const Tensors& t) { linear_forward(t[0], t[1], t[2], t[3]); }));
    c.calls.push_back(
        effect("linear_backward", {0, 1, 4, 5, 6, 7}, {5, 6, 7},
               [](const Tensors& t) { linear_backward(t[0], t[1], t[4], t[5], t[6], t[7]); }));
  } else {
    c.calls.push_back(effect("linear_forward", {0, 1, 3}, {3},
                             [](const Tensors& t) { linear_forward(t[0], t[1], Tensor(), t[3]); }));
    c.calls.push_back(effect("linear_backward", {0, 1, 4, 6}, {6}, [](const Tensors& t) {
      linear_backward(t[0], t[1], t[4], Tensor(), t[6], Tensor());
    }));
  }
  return c;
}

}  // namespace

std::vector<OpCase> dense_cases() {
  std::vector<OpCase> out;
  const std::vector<AlphaBeta> ab = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}};
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const std::string name = std::string("matmul_") + (ta ? "t" : "n") + (tb ? "t" : "n");
    out.push_back(matmul_case(name, 13, 17, 11, ta, tb, ab, 0.0, false));
  }
  // An empty inner dimension (a rank's empty slice, an empty micro-batch): C = beta C.
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const std::string name =
        std::string("matmul_empty_inner_") + (ta ? "t" : "n") + (tb ? "t" : "n");
    out.push_back(matmul_case(name, 3, 4, 0, ta, tb, ab, 0.0, false));
  }
  // The CPU table computes a product with a 16-bit operand in blocks of about 2^20 elements: with
  // 8192 columns that is 128 rows, so 131 rows take a full block and a partial one of 3.
  out.push_back(matmul_case("matmul_row_blocks_nn", 131, 8192, 8, false, false,
                            {{1.0f, 0.0f}, {0.5f, 1.0f}}, 1e-6, true));
  out.push_back(matmul_case("matmul_row_blocks_nt", 131, 8, 8192, false, true,
                            {{1.0f, 0.0f}, {-1.0f, 0.5f}}, 1e-6, true));
  // A^T B reduces over A's 131 rows in K blocks of 128 (M = 8192 columns), C accumulating across
  // blocks (the dW += dy^T x of a vocabulary-wide head).
  out.push_back(matmul_case("matmul_k_blocks_tn", 8192, 8, 131, true, false,
                            {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, 0.25f}}, 1e-6, true));
  out.push_back(linear_case(true));
  out.push_back(linear_case(false));
  return out;
}

}  // namespace strata::ops::test
