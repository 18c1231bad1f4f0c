// Double-precision references of the transformer ops (the definitions kernels and ops are tested
// against, and differentiated by finite differences): matmul, linear, LayerNorm, GELU (tanh),
// causal attention, embedding and softmax cross-entropy. Row-major, the layouts of kernels.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace strata::test {

// C = alpha op(A) op(B) + beta C0 in double; A [M,K] (or [K,M] with ta), B [K,N] (or [N,K]).
template <class TA, class TB, class TC>
std::vector<double> ref_matmul(const std::vector<TA>& A, const std::vector<TB>& B,
                               const std::vector<TC>& C0, int M, int N, int K, bool ta, bool tb,
                               double alpha, double beta) {
  std::vector<double> C(static_cast<std::size_t>(M) * N);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double s = 0.0;
      for (int k = 0; k < K; ++k) {
        const double a =
            ta ? A[static_cast<std::size_t>(k) * M + i] : A[static_cast<std::size_t>(i) * K + k];
        const double b =
            tb ? B[static_cast<std::size_t>(j) * K + k] : B[static_cast<std::size_t>(k) * N + j];
        s += a * b;
      }
      C[static_cast<std::size_t>(i) * N + j] =
          alpha * s + beta * double(C0[static_cast<std::size_t>(i) * N + j]);
    }
  }
  return C;
}

// y[N,out] = x[N,in] W[out,in]^T + b (b may be null).
inline std::vector<double> ref_linear(const std::vector<double>& x, const std::vector<double>& W,
                                      const std::vector<double>* b, int N, int in, int out) {
  std::vector<double> y(static_cast<std::size_t>(N) * out);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int i = 0; i < in; ++i)
        s += x[static_cast<std::size_t>(n) * in + i] * W[static_cast<std::size_t>(o) * in + i];
      y[static_cast<std::size_t>(n) * out + o] = s;
    }
  }
  return y;
}

// LayerNorm over rows of x [N,C]; appends each row's mean and 1/sqrt(var + eps) when asked.
inline std::vector<double> ref_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                                         const std::vector<double>& b, int N, int C,
                                         std::vector<double>* mean = nullptr,
                                         std::vector<double>* rstd = nullptr, double eps = 1e-5) {
  std::vector<double> y(x.size());
  for (int n = 0; n < N; ++n) {
    const double* xr = x.data() + static_cast<std::size_t>(n) * C;
    double m = 0.0, v = 0.0;
    for (int c = 0; c < C; ++c) m += xr[c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= C;
    const double rs = 1.0 / std::sqrt(v + eps);
    if (mean) mean->push_back(m);
    if (rstd) rstd->push_back(rs);
    for (int c = 0; c < C; ++c)
      y[static_cast<std::size_t>(n) * C + c] = (xr[c] - m) * rs * w[c] + b[c];
  }
  return y;
}

// GELU, tanh approximation (PyTorch approximate='tanh').
inline double ref_gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// Causal multi-head attention: out[B,T,C] from qkv[B,T,3C]; lse[B,NH,T] if given.
inline std::vector<double> ref_attention(const std::vector<double>& qkv, int B, int T, int C,
                                         int NH, std::vector<double>* lse = nullptr) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<double> out(static_cast<std::size_t>(B) * T * C, 0.0), s(T);
  if (lse) lse->assign(static_cast<std::size_t>(B) * NH * T, 0.0);
  auto at = [&](int b, int t, int part, int h, int d) {
    return qkv[(static_cast<std::size_t>(b) * T + t) * 3 * C + part * C + h * hs + d];
  };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < T; ++i) {
        double m = -1e300;
        for (int j = 0; j <= i; ++j) {
          double d = 0.0;
          for (int e = 0; e < hs; ++e) d += at(b, i, 0, h, e) * at(b, j, 1, h, e);
          s[j] = d * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += std::exp(s[j] - m);
        if (lse) (*lse)[(static_cast<std::size_t>(b) * NH + h) * T + i] = m + std::log(sum);
        for (int j = 0; j <= i; ++j) {
          const double p = std::exp(s[j] - m) / sum;
          for (int e = 0; e < hs; ++e)
            out[(static_cast<std::size_t>(b) * T + i) * C + h * hs + e] += p * at(b, j, 2, h, e);
        }
      }
    }
  }
  return out;
}

// out[b*T+t, :] = wte[tok[b,t], :] + wpe[t, :].
inline std::vector<double> ref_embedding(const std::vector<std::int32_t>& tok,
                                         const std::vector<double>& wte,
                                         const std::vector<double>& wpe, int B, int T, int C) {
  std::vector<double> out(static_cast<std::size_t>(B) * T * C);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        out[(static_cast<std::size_t>(b) * T + t) * C + c] =
            wte[static_cast<std::size_t>(tok[static_cast<std::size_t>(b) * T + t]) * C + c] +
            wpe[static_cast<std::size_t>(t) * C + c];
  return out;
}

// Softmax cross-entropy: the sum over rows with target >= 0 of (lse - logit[target]); appends
// every row's lse when asked.
inline double ref_ce(const std::vector<double>& logits, const std::vector<std::int32_t>& tgt, int N,
                     int V, std::vector<double>* lse = nullptr) {
  double total = 0.0;
  for (int n = 0; n < N; ++n) {
    const double* r = logits.data() + static_cast<std::size_t>(n) * V;
    double m = -1e300, s = 0.0;
    for (int v = 0; v < V; ++v) m = std::max(m, r[v]);
    for (int v = 0; v < V; ++v) s += std::exp(r[v] - m);
    const double l = m + std::log(s);
    if (lse) lse->push_back(l);
    if (tgt[n] >= 0) total += l - r[tgt[n]];
  }
  return total;
}

}  // namespace strata::test
