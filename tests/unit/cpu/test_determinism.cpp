// Every kernel gives bitwise the same outputs whatever the thread count (1, 2, 3, 8), once per
// instruction set.
#include <functional>

#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

// Runs `fn` (which fills its outputs from scratch each call) under several thread counts and
// checks each run matches the single-threaded one bit for bit.
void expect_thread_invariant(const std::function<std::vector<float>()>& fn, const char* what) {
  std::vector<float> base;
  {
    ThreadScope one(1);
    base = fn();
  }
  for (int t : {2, 3, 8}) {
    ThreadScope scope(t);
    EXPECT_TRUE(bitwise_equal(fn(), base)) << what << " differs with " << t << " threads";
  }
}

using Determinism = IsaTest;

TEST_P(Determinism, AllKernelsAreBitwiseThreadInvariant) {
  const int B = 4, T = 150, C = 96, NH = 3, V = 300, N = B * T;
  const std::size_t nc = static_cast<std::size_t>(N) * C;
  const auto x = randn(nc, 90), w = randn(C, 91), b = randn(C, 92), dy = randn(nc, 93);
  const auto W = randn(static_cast<std::size_t>(3 * C) * C, 94, 0.1f), bW = randn(3 * C, 95);
  const auto dyW = randn(static_cast<std::size_t>(N) * 3 * C, 96);

  expect_thread_invariant(
      [&] {
        std::vector<float> y(nc), m(N), r(N);
        layernorm_forward(x.data(), w.data(), b.data(), y.data(), m.data(), r.data(), N, C, 1e-5f);
        std::vector<float> dx(nc), dw(C, 1.0f), db(C, 2.0f);
        layernorm_backward(dy.data(), x.data(), w.data(), m.data(), r.data(), dx.data(), dw.data(),
                           db.data(), N, C);
        y.insert(y.end(), dx.begin(), dx.end());
        y.insert(y.end(), dw.begin(), dw.end());
        y.insert(y.end(), db.begin(), db.end());
        return y;
      },
      "layernorm");

  expect_thread_invariant(
      [&] {
        std::vector<float> y(static_cast<std::size_t>(N) * 3 * C), dx(nc), dWt(W.size(), 0.5f),
            db(3 * C, 0.25f);
        linear_forward(x.data(), W.data(), bW.data(), y.data(), N, C, 3 * C);
        linear_backward(x.data(), W.data(), dyW.data(), dx.data(), dWt.data(), db.data(), N, C,
                        3 * C);
        y.insert(y.end(), dx.begin(), dx.end());
        y.insert(y.end(), dWt.begin(), dWt.end());
        y.insert(y.end(), db.begin(), db.end());
        return y;
      },
      "linear");

  expect_thread_invariant(
      [&] {
        std::vector<float> c(static_cast<std::size_t>(V) * C, 1.0f);  // dwte-like: [V,C] += A^T B
        const auto a = randn(static_cast<std::size_t>(N) * V, 97);
        matmul(a.data(), x.data(), c.data(), V, C, N, true, false, 1.0f, 1.0f);
        return c;
      },
      "matmul");

  expect_thread_invariant(
      [&] {
        std::vector<float> g(nc), d(nc);
        gelu_forward(x.data(), g.data(), nc);
        gelu_backward(x.data(), dy.data(), d.data(), nc);
        g.insert(g.end(), d.begin(), d.end());
        return g;
      },
      "gelu");

  const auto qkv = randn(static_cast<std::size_t>(N) * 3 * C, 98);
  expect_thread_invariant(
      [&] {
        std::vector<float> out(nc), lse(static_cast<std::size_t>(B) * NH * T), dqkv(qkv.size());
        attention_forward(qkv.data(), out.data(), lse.data(), B, T, C, NH);
        attention_backward(qkv.data(), out.data(), lse.data(), dy.data(), dqkv.data(), B, T, C, NH);
        out.insert(out.end(), lse.begin(), lse.end());
        out.insert(out.end(), dqkv.begin(), dqkv.end());
        return out;
      },
      "attention");

  const auto tok = randint(N, 50, 99);  // many repeats
  expect_thread_invariant(
      [&] {
        std::vector<float> wte = randn(static_cast<std::size_t>(50) * C, 100),
                           wpe = randn(static_cast<std::size_t>(T) * C, 101);
        std::vector<float> out(nc);
        embedding_forward(tok.data(), wte.data(), wpe.data(), out.data(), B, T, C);
        embedding_backward(tok.data(), dy.data(), wte.data(), wpe.data(), B, T, C);
        out.insert(out.end(), wte.begin(), wte.end());
        out.insert(out.end(), wpe.begin(), wpe.end());
        return out;
      },
      "embedding");

  const auto logits = randn(static_cast<std::size_t>(N) * V, 102, 2.0f);
  auto tgt = randint(N, V, 103);
  tgt[5] = -1;
  expect_thread_invariant(
      [&] {
        std::vector<float> lse(N), d(logits.size());
        const double loss = cross_entropy_forward(logits.data(), tgt.data(), lse.data(), N, V);
        cross_entropy_backward(logits.data(), lse.data(), tgt.data(), d.data(), N, V, 1.0f / N);
        float lb[2];
        std::memcpy(lb, &loss, sizeof loss);
        d.insert(d.end(), lb, lb + 2);
        d.insert(d.end(), lse.begin(), lse.end());
        return d;
      },
      "cross_entropy");

  const auto big = randn(1000003, 104);
  expect_thread_invariant(
      [&] {
        const double s = sum_squares(big.data(), big.size());
        float f[2];
        std::memcpy(f, &s, sizeof s);
        return std::vector<float>(f, f + 2);
      },
      "sum_squares");
}

TEST(Threads, SetNumThreadsRoundTripsAndRejectsZero) {
  ThreadScope scope(3);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_THROW(set_num_threads(0), strata::Error);
  EXPECT_EQ(num_threads(), 3);
}

STRATA_INSTANTIATE_ISA(Determinism);

}  // namespace
}  // namespace strata::cpu::test
