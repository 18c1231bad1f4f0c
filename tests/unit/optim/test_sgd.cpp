// SGD: bitwise equal to torch.optim.SGD on known values (momentum with dampening, Nesterov,
// weight decay), every SIMD path equal to the scalar reference, PyTorch's first-step rule.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/core/half.hpp"
#include "framework/optim/sgd.hpp"

namespace strata::optim {
namespace {
namespace test_sgd {  // file-local names, unique in a unity build

constexpr std::size_t kN = 19;

std::vector<float> init_params() {
  std::vector<float> p(kN);
  for (std::size_t i = 0; i < kN; ++i) p[i] = static_cast<float>((static_cast<int>(i * 37 % 19) - 9) / 8.0);
  return p;
}
std::vector<float> grads(int k) {
  const double scale[] = {1.0, 1.0 / 64, 4.0};
  std::vector<float> g(kN);
  for (std::size_t i = 0; i < kN; ++i)
    g[i] = static_cast<float>((static_cast<int>(i * (k + 3) * 13 % 23) - 11) / 16.0 * scale[k]);
  return g;
}

// Generated with Debian's python3-torch 1.13 (AVX2 kernels), inputs as in test_adamw.cpp:
//   def sgd(lr, mom, damp, wd, nesterov):
//       p = inputs(-1).requires_grad_(True)
//       opt = torch.optim.SGD([p], lr=lr, momentum=mom, dampening=damp, weight_decay=wd,
//                             nesterov=nesterov)
//       for step in (1, 2, 3):
//           p.grad = inputs(step - 1).clone(); opt.step()
//       return p, opt.state[p]['momentum_buffer']   # printed as float32 bit patterns
// sgd(0.1, 0.9, 0.25, 0.01, False)
const std::uint32_t kSgdMomentum_p[kN] = {0xbf39c1ac, 0x3f62b708, 0x3f742d76, 0x3f82d1f2, 0x3f344c7b, 0x3f45c2eb, 0x3ed1a5e7, 0x3db54edd, 0x3e23c7e1, 0x3e69a19d, 0xbdbe057e, 0xbcc9481c, 0xbec4d116, 0xbea1e438, 0xbf231b34, 0xbf11a4c4, 0xbefeb94e, 0xbf5185bf, 0xbf973adb};
const std::uint32_t kSgdMomentum_buf[kN] = {0xc0299e5b, 0x3fe31bec, 0x3f2c07d4, 0xbedc505e, 0xbec5d48f, 0xbfbe8d26, 0x3fdc5ad9, 0x3fe3ea30, 0x3f29c397, 0xbee0d8d8, 0xbec29b7e, 0xbfbdbee0, 0x3fdb38bb, 0x3f1c4173, 0x3f2b6021, 0xbedd9fc6, 0xbfc67056, 0xbfbee0ff, 0x3fdc0700};
// sgd(0.05, 0.8, 0.0, 0.1, True)
const std::uint32_t kSgdNesterov_p[kN] = {0xbf3c71b9, 0x3f5c2b20, 0x3f647431, 0x3f6cbd41, 0x3f4035ce, 0x3f487edd, 0x3e989a18, 0x3df899a6, 0x3e203aa4, 0x3e415ee5, 0x3c477850, 0x3d366f1a, 0xbee030f7, 0xbecf9ed6, 0xbf150943, 0xbf0cc033, 0xbf03c4be, 0xbf30fe96, 0xbf969834};
const std::uint32_t kSgdNesterov_buf[kN] = {0xc05d37c7, 0x401d87d2, 0x3f950999, 0xbe07e37e, 0xbf0e282e, 0xbfed1a21, 0x40266fec, 0x400c872e, 0x3f61844d, 0xbed50f8a, 0xbf522ab8, 0xc0078db3, 0x40144c32, 0x3f82925b, 0x3f1d81c1, 0xbf2e8a51, 0xbfff915f, 0xc019b16c, 0x40034b8f};

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

std::vector<SimdPath> supported_paths() {
  std::vector<SimdPath> out;
  for (SimdPath p : {SimdPath::scalar, SimdPath::avx2, SimdPath::avx512})
    if (simd_path_supported(p)) out.push_back(p);
  return out;
}

void check_known(const SGDHyper& h, const std::uint32_t* want_p, const std::uint32_t* want_buf) {
  for (SimdPath path : supported_paths()) {
    std::vector<float> p = init_params(), buf(kN, 123.0f);  // garbage: step 1 must overwrite it
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g = grads(step - 1);
      for (float& x : g) x *= 256.0f;
      sgd_step_on(path, p.data(), g.data(), buf.data(), kN, h, step, 1.0f / 256.0f);
    }
    for (std::size_t i = 0; i < kN; ++i) {
      EXPECT_EQ(bits(p[i]), want_p[i]) << "param[" << i << "] " << simd_path_name(path);
      EXPECT_EQ(bits(buf[i]), want_buf[i]) << "buf[" << i << "] " << simd_path_name(path);
    }
  }
}

TEST(SGD, MatchesPyTorchBitwiseWithMomentumDampeningAndDecay) {
  check_known(SGDHyper{.lr = 0.1, .momentum = 0.9, .dampening = 0.25, .weight_decay = 0.01},
              kSgdMomentum_p, kSgdMomentum_buf);
}

TEST(SGD, MatchesPyTorchBitwiseWithNesterov) {
  check_known(
      SGDHyper{.lr = 0.05, .momentum = 0.8, .dampening = 0.0, .weight_decay = 0.1, .nesterov = true},
      kSgdNesterov_p, kSgdNesterov_buf);
}

TEST(SGD, PlainSgdIsPMinusLrG) {
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, g = {0.5f, 0.25f, -1.0f};
  sgd_step(p.data(), g.data(), nullptr, 3, SGDHyper{.lr = 0.5}, 1);
  EXPECT_EQ(p[0], 0.75f);
  EXPECT_EQ(p[1], -2.125f);
  EXPECT_EQ(p[2], 1.0f);
}

TEST(SGD, EveryPathAndThreadSplitEqualsScalarReferenceBitwise) {
  const SGDHyper hypers[] = {
      {.lr = 0.1},
      {.lr = 0.01, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-4},
      {.lr = 0.03, .momentum = 0.95, .weight_decay = 0.2, .nesterov = true},
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t n : {std::size_t{1}, std::size_t{9}, std::size_t{17}, std::size_t{1003},
                        std::size_t{262147}}) {
    std::vector<float> p0(n), g(n), b0(n);
    for (std::size_t i = 0; i < n; ++i) {
      p0[i] = normal(rng);
      g[i] = normal(rng) * 1e3f;
      b0[i] = normal(rng);
    }
    for (const SGDHyper& h : hypers) {
      for (int step : {1, 2}) {
        std::vector<float> rp = p0, rb = b0;
        sgd_step_reference(rp.data(), g.data(), rb.data(), n, h, step, 0.125f);
        for (SimdPath path : supported_paths()) {
          std::vector<float> p = p0, b = b0;
          sgd_step_on(path, p.data(), g.data(), b.data(), n, h, step, 0.125f);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < n; ++i)
            bad += bits(p[i]) != bits(rp[i]) || bits(b[i]) != bits(rb[i]);
          EXPECT_EQ(bad, 0u) << "n=" << n << " path=" << simd_path_name(path) << " step=" << step;
        }
        std::vector<float> p = p0, b = b0;
        std::vector<std::uint16_t> p16(n);
        sgd_step_out16(p.data(), g.data(), b.data(), n, h, step, 0.125f, p16.data(), DType::bf16);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(bits(p[i]), bits(rp[i])) << i;
          ASSERT_EQ(p16[i], f32_to_bf16(rp[i])) << i;
        }
      }
    }
  }
}

TEST(SGD, RejectsBadArguments) {
  std::vector<float> p(3, 1.0f), g(3, 1.0f), b(3, 0.0f);
  EXPECT_THROW(sgd_step(p.data(), g.data(), b.data(), 3, SGDHyper{.lr = 0.1, .nesterov = true}, 1),
               UserError);  // Nesterov without momentum
  EXPECT_THROW(sgd_step(p.data(), g.data(), b.data(), 3,
                        SGDHyper{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}, 1),
               UserError);
  EXPECT_THROW(sgd_step(p.data(), g.data(), nullptr, 3, SGDHyper{.lr = 0.1, .momentum = 0.9}, 1),
               Error);  // momentum needs a buffer
  EXPECT_THROW(sgd_step(p.data(), g.data(), b.data(), 3, SGDHyper{.lr = 0.1}, 0), Error);
  EXPECT_THROW(sgd_step(p.data(), g.data(), b.data(), 3, SGDHyper{.lr = -0.1}, 1), UserError);
  for (float x : p) EXPECT_EQ(x, 1.0f);
}

}  // namespace test_sgd
}  // namespace
}  // namespace strata::optim
