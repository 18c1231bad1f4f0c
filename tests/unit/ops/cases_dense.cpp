// Harness cases of the dense algebra: matmul (every transpose, alpha/beta, each operand 16-bit in
// turn, sizes past a tile, the CPU table's row-blocked and K-blocked paths) and linear
// forward/backward (dtype mixes of every output and the bias, tall and wide sizes, no inputs).
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

// f32, then each of A, B, C 16-bit in turn and all three, for bf16 and f16; then A and B 16-bit
// with an f32 C and with a C of the other 16-bit dtype (CUDA: the 16-bit product runs directly
// into an f32 C, or into an f32 workspace rounded into C).
std::vector<Combo> matmul_combos() {
  std::vector<Combo> out{{"f32", {}}};
  for (DType dt : {DType::bf16, DType::f16}) {
    const std::string n(dtype_name(dt));
    out.push_back({"A_" + n, {{'A', dt}}});
    out.push_back({"B_" + n, {{'B', dt}}});
    out.push_back({"C_" + n, {{'C', dt}}});
    out.push_back({n, {{'A', dt}, {'B', dt}, {'C', dt}}});
  }
  for (DType dt : {DType::bf16, DType::f16}) {
    const DType other = dt == DType::bf16 ? DType::f16 : DType::bf16;
    const std::string n(dtype_name(dt)), o(dtype_name(other));
    out.push_back({"AB_" + n, {{'A', dt}, {'B', dt}}});
    out.push_back({"AB_" + n + "_C_" + o, {{'A', dt}, {'B', dt}, {'C', other}}});
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

// Linear forward and backward, x [N, in] -> y [N, out]. With `own_groups` each tensor has its own
// dtype group (x 'x', W 'w', b 'b', y 'y', dy 'g', dx 'd', dW 'W', db 'B'), for combinations that
// give the bias and the outputs dtypes of their own; else the standard groups ('a', 'p').
OpCase linear_case(const std::string& name, int N, int in, int out, bool bias,
                   bool own_groups = false) {
  const auto g = [own_groups](char own, char standard) { return own_groups ? own : standard; };
  OpCase c;
  c.name = name;
  c.tensors = {
      {"x", Shape{N, in}, g('x', 'a'), normal()},       // 0
      {"W", Shape{out, in}, g('w', 'p'), normal(0.3)},  // 1
      {"b", Shape{out}, g('b', 'p'), normal()},         // 2
      {"y", Shape{N, out}, g('y', 'a'), unset()},       // 3
      {"dy", Shape{N, out}, g('g', 'a'), normal()},     // 4
      {"dx", Shape{N, in}, g('d', 'a'), unset()},       // 5
      {"dW", Shape{out, in}, g('W', 'p'), normal()},    // 6 accumulated
      {"db", Shape{out}, g('B', 'p'), normal()},        // 7 accumulated
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
  // Sizes past one tile with tails in every dimension (CUDA: cuBLASLt's tensor-core kernels for
  // the 16-bit products, odd leading dimensions).
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const std::string name = std::string("matmul_tiles_") + (ta ? "t" : "n") + (tb ? "t" : "n");
    out.push_back(matmul_case(name, 70, 90, 261, ta, tb, ab, 1e-6, false));
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
  // N=7 rows, in=13, out=9.
  out.push_back(linear_case("linear", 7, 13, 9, true));
  out.push_back(linear_case("linear_no_bias_no_dx", 7, 13, 9, false));
  // Sizes with tails in every dimension (and 16-bit rows of odd lengths), in dtype mixes where the
  // bias, y, dx, dW and db each take their own dtype (CUDA: the bias added by the cuBLASLt
  // epilogue or preloaded, into y or into an f32 workspace; 16-bit products run directly or
  // widened; dW accumulated in place or through a workspace).
  {
    OpCase c = linear_case("linear_mixed_dtypes", 67, 101, 129, true, true);
    const DType bf = DType::bf16, h = DType::f16;
    c.combos = {
        {"f32", {}},
        {"W_bf16_x_f32", {{'w', bf}, {'b', bf}, {'W', bf}, {'B', bf}}},
        {"bf16_b_f32", {{'x', bf}, {'w', bf}, {'y', bf}, {'g', bf}, {'d', bf}}},
        {"f16_y_f32", {{'x', h}, {'w', h}, {'b', h}, {'g', h}, {'W', h}, {'B', bf}}},
        {"bf16_y_f16",
         {{'x', bf}, {'w', bf}, {'b', bf}, {'y', h}, {'g', bf}, {'d', h}, {'W', bf}, {'B', h}}},
        {"x_bf16_W_f16",
         {{'x', bf}, {'w', h}, {'b', bf}, {'y', bf}, {'g', h}, {'d', bf}, {'W', h}}},
    };
    for (Call& call : c.calls) call.tol.rtol = 1e-6;
    out.push_back(std::move(c));
  }
  // Many rows, few features: dW = dy^T x reduces over 4096 rows (CUDA: a split-K candidate) and
  // db's column sums span many strips of rows.
  {
    OpCase c = linear_case("linear_tall", 4096, 32, 48, true);
    c.large = true;
    for (Call& call : c.calls) call.tol.rtol = 1e-6;
    out.push_back(std::move(c));
  }
  // A layer of realistic aligned width (CUDA: the tensor-core tiles of the 16-bit products).
  {
    OpCase c = linear_case("linear_wide", 128, 128, 384, true);
    c.large = true;
    for (Call& call : c.calls) call.tol.rtol = 1e-6;
    out.push_back(std::move(c));
  }
  // No input features: y = b broadcast over rows, dW and dx empty, db += column sums of dy.
  {
    OpCase c = linear_case("linear_empty_in", 5, 0, 3, true);
    for (Call& call : c.calls) call.tol.rtol = 1e-6;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace strata::ops::test
