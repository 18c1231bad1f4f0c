// Numeric helpers shared by the kernel and op tests: seeded random data, tolerance checks relative
// to a reference's scale, and double-precision central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace strata::test {

inline std::vector<float> randn(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline std::vector<std::int32_t> randint(std::size_t n, int hi, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(0, hi - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<float> nan_filled(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// Passes when max_i |got_i - ref_i| <= rtol * max(max_i |ref_i|, floor): an error relative to
// the scale of the reference (elementwise relative error is meaningless near zeros).
template <class G, class R>
::testing::AssertionResult close(const G& got, const R& ref, double rtol, double floor = 1e-6) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size mismatch";
  double scale = floor, err = 0.0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, std::abs(double(ref[i])));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(double(got[i]) - double(ref[i]));
    if (!(e <= err)) {  // also catches NaN
      err = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
      worst = i;
    }
  }
  if (err <= rtol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max error " << err << " at " << worst << " (got " << double(got[worst]) << ", ref "
         << double(ref[worst]) << ") exceeds " << rtol << " * scale " << scale;
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Central finite differences for the coordinates `idx` only (for inputs too large to do all).
template <class F>
std::vector<double> fd_grad_at(std::vector<double> x, const std::vector<std::size_t>& idx, F&& f,
                               double h = 1e-5) {
  std::vector<double> g(idx.size());
  for (std::size_t n = 0; n < idx.size(); ++n) {
    const std::size_t i = idx[n];
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[n] = (fp - fm) / (2.0 * h);
  }
  return g;
}

// Central finite differences of a scalar function of x (double): grad_i = (f(x+h e_i) -
// f(x-h e_i)) / 2h. f takes the whole vector.
template <class F>
std::vector<double> fd_grad(std::vector<double> x, F&& f, double h = 1e-5) {
  std::vector<std::size_t> all(x.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return fd_grad_at(std::move(x), all, std::forward<F>(f), h);
}

// `count` distinct-ish coordinates in [0, n), seeded.
inline std::vector<std::size_t> sample_indices(std::size_t n, std::size_t count,
                                               std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::size_t> d(0, n - 1);
  std::vector<std::size_t> v(count);
  for (auto& i : v) i = d(gen);
  return v;
}

// L = sum(y * R) in double.
inline double dot_loss(const std::vector<double>& y, const std::vector<float>& R) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * double(R[i]);
  return s;
}

}  // namespace strata::test
