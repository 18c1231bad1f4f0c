// Finite-difference gradient checks of every differentiable op through ops:: (f32 tensors, small
// shapes): the op's forward against the double reference of tests/support/reference_math.hpp, and
// its backward (input and parameter gradients, the latter accumulated onto random values) against
// double-precision central differences of that reference for L = sum(out * R). matmul has no
// backward op: its gradients are the transposed products dA, dB computed with ops::matmul.
// Tolerances as the kernel tests': forward 1e-5, backward 1e-4, relative to the largest reference
// magnitude.
#include <functional>

#include "framework/backend/ops/ops.hpp"
#include "tests/support/numeric.hpp"
#include "tests/support/reference_math.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {
namespace test_gradients {  // file-local names, unique in a unity build

using namespace ::strata::test;
using Doubles = std::vector<std::vector<double>>;

struct GradCase {
  std::string name;
  std::vector<Spec> tensors;  // drawn f32 (i32 for group 'i') as the harness draws them
  std::vector<int> wrt;       // the tensors differentiated
  // The double reference of the output, from every tensor as doubles.
  std::function<std::vector<double>(const Doubles& v)> ref;
  // The op's output through ops::.
  std::function<Tensor(const std::vector<Tensor>& t)> forward;
  // The gradients of L = sum(out * R) with respect to each of `wrt`, through ops::.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& t, const Tensor& R)> backward;
};

// A gradient to accumulate into: random values, remembered so that grad() can subtract them.
struct Accumulated {
  explicit Accumulated(const Shape& s, std::uint32_t seed)
      : init(randn(static_cast<std::size_t>(s.numel()), seed)), t(Tensor::empty(s, DType::f32)) {
    std::copy(init.begin(), init.end(), t.data<float>());
  }
  // What the op added.
  Tensor grad() const {
    Tensor g = t.to(DType::f32, TensorOptions{});
    float* p = g.data<float>();
    for (std::size_t i = 0; i < init.size(); ++i) p[i] -= init[i];
    return g;
  }
  std::vector<float> init;
  Tensor t;
};

Tensor empty_like(const Tensor& t) {
  return Tensor::empty(t.shape(), DType::f32);
}

GradCase linear_case(bool bias) {
  GradCase g;
  g.name = bias ? "linear" : "linear_no_bias";
  const int N = 3, in = 5, out = 4;
  g.tensors = {{"x", Shape{N, in}, 'a', normal()},
               {"W", Shape{out, in}, 'p', normal(0.5)},
               {"b", Shape{out}, 'p', normal()}};
  g.wrt = bias ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1};
  g.ref = [=](const Doubles& v) {
    return ref_linear(v[0], v[1], bias ? &v[2] : nullptr, N, in, out);
  };
  g.forward = [=](const std::vector<Tensor>& t) {
    Tensor y = Tensor::empty(Shape{N, out}, DType::f32);
    linear_forward(t[0], t[1], bias ? t[2] : Tensor(), y);
    return y;
  };
  g.backward = [=](const std::vector<Tensor>& t, const Tensor& R) {
    Tensor dx = empty_like(t[0]);
    Accumulated dW(t[1].shape(), 1), db(t[2].shape(), 2);
    linear_backward(t[0], t[1], R.view(Shape{N, out}), dx, dW.t, bias ? db.t : Tensor());
    std::vector<Tensor> grads{dx, dW.grad()};
    if (bias) grads.push_back(db.grad());
    return grads;
  };
  return g;
}

GradCase layernorm_case() {
  GradCase g;
  g.name = "layernorm";
  const int N = 4, C = 7;
  g.tensors = {{"x", Shape{N, C}, 'a', normal(2.0, 1.0)},
               {"w", Shape{C}, 'p', normal(0.5, 1.0)},
               {"b", Shape{C}, 'p', normal()}};
  g.wrt = {0, 1, 2};
  g.ref = [=](const Doubles& v) { return ref_layernorm(v[0], v[1], v[2], N, C); };
  auto fwd = [=](const std::vector<Tensor>& t, Tensor& mean, Tensor& rstd) {
    Tensor y = empty_like(t[0]);
    mean = Tensor::empty(Shape{N}, DType::f32);
    rstd = Tensor::empty(Shape{N}, DType::f32);
    layernorm_forward(t[0], t[1], t[2], y, mean, rstd, 1e-5f);
    return y;
  };
  g.forward = [=](const std::vector<Tensor>& t) {
    Tensor mean, rstd;
    return fwd(t, mean, rstd);
  };
  g.backward = [=](const std::vector<Tensor>& t, const Tensor& R) {
    Tensor mean, rstd;
    fwd(t, mean, rstd);
    Tensor dx = empty_like(t[0]);
    Accumulated dw(t[1].shape(), 3), db(t[2].shape(), 4);
    layernorm_backward(R.view(t[0].shape()), t[0], t[1], mean, rstd, dx, dw.t, db.t);
    return std::vector<Tensor>{dx, dw.grad(), db.grad()};
  };
  return g;
}

GradCase gelu_case() {
  GradCase g;
  g.name = "gelu";
  g.tensors = {{"x", Shape{6, 9}, 'a', normal(2.0)}};
  g.wrt = {0};
  g.ref = [](const Doubles& v) {
    std::vector<double> y(v[0].size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = ref_gelu(v[0][i]);
    return y;
  };
  g.forward = [](const std::vector<Tensor>& t) {
    Tensor y = empty_like(t[0]);
    gelu_forward(t[0], y);
    return y;
  };
  g.backward = [](const std::vector<Tensor>& t, const Tensor& R) {
    Tensor dx = empty_like(t[0]);
    gelu_backward(t[0], R.view(t[0].shape()), dx);
    return std::vector<Tensor>{dx};
  };
  return g;
}

GradCase attention_case() {
  const int B = 2, T = 9, C = 6, NH = 2;
  auto fwd = [=](const std::vector<Tensor>& t, Tensor& lse) {
    Tensor out = Tensor::empty(Shape{B, T, C}, DType::f32);
    lse = Tensor::empty(Shape{B * NH * T}, DType::f32);
    attention_forward(t[0], out, lse, NH);
    return out;
  };
  return {.name = "attention",
          .tensors = {{"qkv", Shape{B, T, 3 * C}, 'a', normal()}},
          .wrt = {0},
          .ref = [=](const Doubles& v) { return ref_attention(v[0], B, T, C, NH); },
          .forward =
              [=](const std::vector<Tensor>& t) {
                Tensor lse;
                return fwd(t, lse);
              },
          .backward =
              [=](const std::vector<Tensor>& t, const Tensor& R) {
                Tensor lse;
                Tensor out = fwd(t, lse);
                Tensor dqkv = empty_like(t[0]);
                attention_backward(t[0], out, lse, R.view(out.shape()), dqkv, NH);
                return std::vector<Tensor>{dqkv};
              }};
}

GradCase embedding_case() {
  const int B = 2, T = 3, C = 5, V = 4;
  return {.name = "embedding",
          .tensors = {{"tokens", Shape{B, T}, 'i', tokens(V)},
                      {"wte", Shape{V, C}, 'p', normal()},
                      {"wpe", Shape{T, C}, 'p', normal()}},
          .wrt = {1, 2},
          .ref =
              [=](const Doubles& v) {
                const std::vector<std::int32_t> tok(v[0].begin(), v[0].end());
                return ref_embedding(tok, v[1], v[2], B, T, C);
              },
          .forward =
              [=](const std::vector<Tensor>& t) {
                Tensor out = Tensor::empty(Shape{B * T, C}, DType::f32);
                embedding_forward(t[0], t[1], t[2], out);
                return out;
              },
          .backward =
              [=](const std::vector<Tensor>& t, const Tensor& R) {
                Accumulated dwte(t[1].shape(), 5), dwpe(t[2].shape(), 6);
                embedding_backward(t[0], R.view(Shape{B * T, C}), dwte.t, dwpe.t);
                return std::vector<Tensor>{dwte.grad(), dwpe.grad()};
              }};
}

// The loss (a sum over the rows not ignored) as a one-element output: dlogits = R * gradient.
GradCase cross_entropy_case() {
  GradCase g;
  g.name = "cross_entropy";
  const int N = 5, V = 7;
  g.tensors = {{"logits", Shape{N, V}, 'a', normal(2.0)}, {"targets", Shape{N}, 'i', tokens(V, 3)}};
  g.wrt = {0};
  g.ref = [=](const Doubles& v) {
    const std::vector<std::int32_t> tgt(v[1].begin(), v[1].end());
    return std::vector<double>{ref_ce(v[0], tgt, N, V)};
  };
  g.forward = [=](const std::vector<Tensor>& t) {
    Tensor lse = Tensor::empty(Shape{N}, DType::f32), loss = Tensor::empty(Shape{1}, DType::f32);
    loss.data<float>()[0] = static_cast<float>(cross_entropy_forward(t[0], t[1], lse));
    return loss;
  };
  g.backward = [=](const std::vector<Tensor>& t, const Tensor& R) {
    Tensor lse = Tensor::empty(Shape{N}, DType::f32), d = empty_like(t[0]);
    cross_entropy_forward(t[0], t[1], lse);
    cross_entropy_backward(t[0], lse, t[1], d, R.data<float>()[0]);
    return std::vector<Tensor>{d};
  };
  return g;
}

// C = alpha op(A) op(B) + beta C0; dA and dB by ops::matmul, accumulated (beta = 1).
GradCase matmul_case(bool ta, bool tb) {
  GradCase g;
  g.name = std::string("matmul_") + (ta ? "t" : "n") + (tb ? "t" : "n");
  const int M = 3, N = 4, K = 5;
  const float alpha = 0.75f, beta = 0.5f;
  g.tensors = {{"A", ta ? Shape{K, M} : Shape{M, K}, 'a', normal()},
               {"B", tb ? Shape{N, K} : Shape{K, N}, 'p', normal()},
               {"C0", Shape{M, N}, 'a', normal()}};
  g.wrt = {0, 1};
  g.ref = [=](const Doubles& v) {
    return ref_matmul(v[0], v[1], v[2], M, N, K, ta, tb, alpha, beta);
  };
  g.forward = [=](const std::vector<Tensor>& t) {
    Tensor C = t[2].to(DType::f32, TensorOptions{});
    matmul(t[0], t[1], C, ta, tb, alpha, beta);
    return C;
  };
  g.backward = [=](const std::vector<Tensor>& t, const Tensor& R) {
    const Tensor& A = t[0];
    const Tensor& B = t[1];
    const Tensor dC = R.view(Shape{M, N});
    Accumulated dA(A.shape(), 7), dB(B.shape(), 8);
    if (!ta && !tb) {  // C = A B
      matmul(dC, B, dA.t, false, true, alpha, 1.0f);
      matmul(A, dC, dB.t, true, false, alpha, 1.0f);
    } else if (ta && !tb) {  // C = A^T B
      matmul(B, dC, dA.t, false, true, alpha, 1.0f);
      matmul(A, dC, dB.t, false, false, alpha, 1.0f);
    } else if (!ta && tb) {  // C = A B^T
      matmul(dC, B, dA.t, false, false, alpha, 1.0f);
      matmul(dC, A, dB.t, true, false, alpha, 1.0f);
    } else {  // C = A^T B^T
      matmul(B, dC, dA.t, true, true, alpha, 1.0f);
      matmul(dC, A, dB.t, true, true, alpha, 1.0f);
    }
    return std::vector<Tensor>{dA.grad(), dB.grad()};
  };
  return g;
}

std::vector<GradCase> grad_cases() {
  return {linear_case(true),        linear_case(false),
          layernorm_case(),         gelu_case(),
          attention_case(),         embedding_case(),
          cross_entropy_case(),     matmul_case(false, false),
          matmul_case(true, false), matmul_case(false, true),
          matmul_case(true, true)};
}

std::vector<double> as_doubles(const Tensor& t) {
  if (t.dtype() == DType::i32) {
    const std::int32_t* p = t.data<std::int32_t>();
    return std::vector<double>(p, p + t.numel());
  }
  const std::vector<float> v = t.to_vector();
  return std::vector<double>(v.begin(), v.end());
}

class OpGradients : public ::testing::TestWithParam<std::string> {};

TEST_P(OpGradients, BackwardMatchesFiniteDifferencesOfTheDoubleReference) {
  GradCase g;
  for (GradCase& c : grad_cases())
    if (c.name == GetParam()) g = std::move(c);
  OpCase spec;
  spec.name = "grad_" + g.name;
  spec.tensors = g.tensors;
  const std::vector<Tensor> t = draw(spec);
  Doubles v;
  for (const Tensor& x : t) v.push_back(as_doubles(x));

  const std::vector<double> ref = g.ref(v);
  EXPECT_TRUE(close(g.forward(t).to_vector(), ref, 1e-5)) << "forward";

  const Tensor R = Tensor::empty(Shape{static_cast<std::int64_t>(ref.size())}, DType::f32);
  const std::vector<float> r = randn(ref.size(), 9);
  std::copy(r.begin(), r.end(), R.data<float>());
  const std::vector<Tensor> grads = g.backward(t, R);
  ASSERT_EQ(grads.size(), g.wrt.size());
  for (std::size_t k = 0; k < g.wrt.size(); ++k) {
    const int i = g.wrt[k];
    Doubles w = v;
    const std::vector<double> fd =
        fd_grad(v[static_cast<std::size_t>(i)], [&](const std::vector<double>& x) {
          w[static_cast<std::size_t>(i)] = x;
          return dot_loss(g.ref(w), r);
        });
    EXPECT_TRUE(close(grads[k].to_vector(), fd, 1e-4))
        << "gradient of " << g.tensors[static_cast<std::size_t>(i)].name;
  }
}

std::vector<std::string> grad_case_names() {
  std::vector<std::string> n;
  for (const GradCase& c : grad_cases()) n.push_back(c.name);
  return n;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGradients, ::testing::ValuesIn(grad_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace test_gradients
}  // namespace
}  // namespace strata::ops::test
