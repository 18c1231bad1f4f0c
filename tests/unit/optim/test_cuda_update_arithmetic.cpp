// The CUDA optimizer kernels' arithmetic is the CPU's, bit for bit, checked without a GPU: the
// kernels of framework/backend/cuda/ops/optimizer.cu do nothing per element but call adamw_at /
// sgd_at of optimizer.hpp, whose host instantiation is run here over random buffers (every
// gradient dtype, with and without the 16-bit parameter copy, several steps) and compared bitwise
// with optim::adamw_step_reference / sgd_step_reference (and the copy with the CPU's RNE rounding
// of the reference master). The scalars of each step come from optim::detail::adamw_consts /
// sgd_consts, as the CUDA ops take them.
//
// The device instantiation differs only in the primitive of each operation (optimizer.hpp's
// ieee::mul etc.: __fmul_rn ... on the device, the same correctly rounded IEEE operations here);
// the GPU op tests (tests/unit/ops, cuda_*) check the device results bitwise too. Lion's element
// (lion_at) and the 8-bit kernels' byte search (q8_byte) are checked the same way.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "framework/backend/cuda/ops/optimizer.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/dtype.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/lion.hpp"
#include "framework/optim/quantize.hpp"
#include "framework/optim/sgd.hpp"
#include "framework/optim/update_kernels.hpp"

namespace strata::cuda_ops {
namespace {
namespace test_cuda_update {  // file-local names, unique in a unity build

constexpr std::size_t kN = 4099;  // odd, not a multiple of any vector width

DType dtype_of(DT t) {
  return t == DT::bf16 ? DType::bf16 : t == DT::f16 ? DType::f16 : DType::f32;
}
std::string dt_name(DT t) {
  return std::string(dtype_name(dtype_of(t)));
}

// A gradient as one dtype stores it: `raw` is what the kernel reads (through load()), `wide`
// what the CPU op's f32 view of it holds (strata::convert, as cpu_table's In32).
struct Grad {
  DT dt = DT::f32;
  std::vector<float> f32;
  std::vector<std::uint16_t> h16;
  std::vector<float> wide;
  const void* raw() const {
    return dt == DT::f32 ? static_cast<const void*>(f32.data()) : h16.data();
  }
};

// Normal values of `scale`, with zeros, -0, an f32 subnormal, and large values planted.
std::vector<float> draw(std::mt19937& rng, double scale, bool nonneg = false) {
  std::normal_distribution<float> nd(0.0f, static_cast<float>(scale));
  std::vector<float> x(kN);
  for (float& e : x) e = nonneg ? std::abs(nd(rng)) : nd(rng);
  x[0] = 0.0f;
  x[1] = nonneg ? 0.0f : -0.0f;
  x[2] = 1e-41f;  // f32 subnormal
  x[3] = static_cast<float>(scale * 1000.0);
  x[4] = nonneg ? static_cast<float>(scale * 1e-6) : static_cast<float>(-scale * 300.0);
  x[kN - 1] = static_cast<float>(scale * 3.0);
  return x;
}

Grad make_grad(std::mt19937& rng, DT dt, double scale) {
  Grad g;
  g.dt = dt;
  std::vector<float> x = draw(rng, scale);
  if (dt == DT::f32) {
    g.f32 = x;
    g.wide = x;
    return g;
  }
  g.h16.resize(kN);
  convert(x.data(), DType::f32, g.h16.data(), dtype_of(dt), kN);
  g.wide.resize(kN);
  convert(g.h16.data(), dtype_of(dt), g.wide.data(), DType::f32, kN);
  return g;
}

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// "0x..." (AssertionResult streams each value on its own: std::hex would not carry over).
std::string hex(std::uint32_t u) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08x", static_cast<unsigned>(u));
  return s;
}

// Bitwise equality of two f32 buffers, naming the first difference.
::testing::AssertionResult same_bits(const char* what, const std::vector<float>& got,
                                     const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i]))
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: got " << got[i] << " (" << hex(bits(got[i]))
             << "), CPU " << want[i] << " (" << hex(bits(want[i])) << ")";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_u16(const char* what, const std::vector<std::uint16_t>& got,
                                    const std::vector<std::uint16_t>& want) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << what << "[" << i << "]: got " << hex(got[i])
                                           << ", CPU " << hex(want[i]);
  return ::testing::AssertionSuccess();
}

// The CPU's 16-bit copy of a master (update_kernels.cpp's round_to_16: strata's RNE rounding).
std::vector<std::uint16_t> rounded_copy(const std::vector<float>& master, DT hdt) {
  std::vector<std::uint16_t> out(master.size());
  convert(master.data(), DType::f32, out.data(), dtype_of(hdt), master.size());
  return out;
}

struct AdamWSet {
  const char* name;
  optim::AdamWHyper h;
  float grad_scale;
  std::int64_t first_step;
  bool small_w;  // which lerp form the set exercises
};

std::vector<AdamWSet> adamw_sets() {
  using H = optim::AdamWHyper;
  return {
      {"defaults", H{}, 1.0f, 1, true},
      {"one_minus_b1_above_half", H{.lr = 1e-2, .beta1 = 0.3, .beta2 = 0.95, .eps = 1e-6,
                                     .weight_decay = 0.1},
       0.5f, 1, false},
      {"one_minus_b1_exactly_half_no_bias_correction",
       H{.lr = 2e-3, .beta1 = 0.5, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0,
         .bias_correction = false},
       1.0f / 3.0f, 1, false},
      {"b1_b2_zero", H{.lr = 0.1, .beta1 = 0.0, .beta2 = 0.0, .eps = 1e-8, .weight_decay = 0.5},
       1.0f / 1024.0f, 1, false},
      {"late_steps_scaled", H{.lr = 3e-4, .beta1 = 0.99, .beta2 = 0.9999, .eps = 1e-12,
                              .weight_decay = 0.05},
       static_cast<float>(1.0 / 1024.3), 1000, true},
      {"no_bias_correction_small_w", H{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                       .weight_decay = 0.01, .bias_correction = false},
       0.75f, 1, true},
  };
}

TEST(CudaUpdateArithmetic, AdamWElementIsTheCpuReferenceBitwise) {
  bool saw_small = false, saw_large = false;
  for (const AdamWSet& set : adamw_sets()) {
    for (DT gdt : {DT::f32, DT::bf16, DT::f16}) {
      for (int copy = 0; copy < 3; ++copy) {  // none, bf16, f16
        const DT hdt = copy == 2 ? DT::f16 : DT::bf16;
        SCOPED_TRACE(std::string(set.name) + ", grad " + dt_name(gdt) +
                     (copy ? ", copy " + dt_name(hdt) : ", no copy"));
        std::mt19937 rng(1234u + static_cast<unsigned>(copy) * 7u);
        std::vector<float> p = draw(rng, 1.0), m = draw(rng, 0.01), v = draw(rng, 1e-3, true);
        std::vector<float> p_ref = p, m_ref = m, v_ref = v;
        std::vector<std::uint16_t> p16(kN, 0xdeadu);
        for (std::int64_t step = set.first_step; step < set.first_step + 3; ++step) {
          SCOPED_TRACE("step " + std::to_string(step));
          const Grad g = make_grad(rng, gdt, 0.1);
          optim::adamw_step_reference(p_ref.data(), g.wide.data(), m_ref.data(), v_ref.data(), kN,
                                      set.h, step, set.grad_scale);
          const optim::detail::AdamWConsts c =
              optim::detail::adamw_consts(set.h, step, set.grad_scale);
          ASSERT_EQ(c.small_w, set.small_w);
          (c.small_w ? saw_small : saw_large) = true;
          for (std::size_t i = 0; i < kN; ++i)
            adamw_at(static_cast<std::int64_t>(i), p.data(), g.raw(), g.dt, m.data(), v.data(),
                     copy ? p16.data() : nullptr, hdt, c);
          ASSERT_TRUE(same_bits("master", p, p_ref));
          ASSERT_TRUE(same_bits("m", m, m_ref));
          ASSERT_TRUE(same_bits("v", v, v_ref));
          if (copy) {
            ASSERT_TRUE(same_u16("param16", p16, rounded_copy(p_ref, hdt)));
          } else {
            ASSERT_EQ(p16, std::vector<std::uint16_t>(kN, 0xdeadu)) << "param16 written";
          }
        }
      }
    }
  }
  EXPECT_TRUE(saw_small && saw_large) << "both lerp forms must be exercised";
}

struct SgdSet {
  const char* name;
  optim::SGDHyper h;
  float grad_scale;
};

std::vector<SgdSet> sgd_sets() {
  using H = optim::SGDHyper;
  return {
      {"plain", H{.lr = 0.1}, 1.0f},
      {"weight_decay", H{.lr = 0.05, .weight_decay = 1e-2}, 0.5f},
      {"momentum_dampening_decay",
       H{.lr = 0.1, .momentum = 0.9, .dampening = 0.25, .weight_decay = 0.01}, 1.0f},
      {"nesterov", H{.lr = 0.05, .momentum = 0.8, .dampening = 0.0, .weight_decay = 0.1,
                     .nesterov = true},
       static_cast<float>(1.0 / 1024.3)},
      {"momentum_only", H{.lr = 0.01, .momentum = 0.9}, 2.0f},
      {"nesterov_no_decay", H{.lr = 0.2, .momentum = 0.5, .nesterov = true}, 1.0f / 3.0f},
  };
}

TEST(CudaUpdateArithmetic, SgdElementIsTheCpuReferenceBitwise) {
  for (const SgdSet& set : sgd_sets()) {
    const bool momentum = set.h.momentum != 0.0;
    for (DT gdt : {DT::f32, DT::bf16, DT::f16}) {
      for (int copy = 0; copy < 3; ++copy) {
        const DT hdt = copy == 2 ? DT::f16 : DT::bf16;
        SCOPED_TRACE(std::string(set.name) + ", grad " + dt_name(gdt) +
                     (copy ? ", copy " + dt_name(hdt) : ", no copy"));
        std::mt19937 rng(99u + static_cast<unsigned>(copy));
        std::vector<float> p = draw(rng, 1.0);
        // Step 1 must not read the buffer: NaN everywhere would poison any read.
        std::vector<float> buf(kN, std::numeric_limits<float>::quiet_NaN());
        std::vector<float> p_ref = p, buf_ref = buf;
        std::vector<std::uint16_t> p16(kN, 0xdeadu);
        for (std::int64_t step = 1; step <= 3; ++step) {
          SCOPED_TRACE("step " + std::to_string(step));
          const Grad g = make_grad(rng, gdt, 0.1);
          optim::sgd_step_reference(p_ref.data(), g.wide.data(),
                                    momentum ? buf_ref.data() : nullptr, kN, set.h, step,
                                    set.grad_scale);
          const optim::detail::SgdConsts c =
              optim::detail::sgd_consts(set.h, step, set.grad_scale);
          ASSERT_EQ(c.momentum, momentum);
          ASSERT_EQ(c.first, step == 1);
          // As launch_sgd_step: no buffer without momentum.
          for (std::size_t i = 0; i < kN; ++i)
            sgd_at(static_cast<std::int64_t>(i), p.data(), g.raw(), g.dt,
                   momentum ? buf.data() : nullptr, copy ? p16.data() : nullptr, hdt, c);
          ASSERT_TRUE(same_bits("master", p, p_ref));
          if (momentum) {
            ASSERT_TRUE(same_bits("momentum", buf, buf_ref));
          }
          if (copy) {
            ASSERT_TRUE(same_u16("param16", p16, rounded_copy(p_ref, hdt)));
          } else {
            ASSERT_EQ(p16, std::vector<std::uint16_t>(kN, 0xdeadu)) << "param16 written";
          }
        }
      }
    }
  }
}

// Lion's element (lion_at, lion_update) against optim::lion_step, bitwise, with and without
// weight decay, every gradient dtype and 16-bit copy, chained steps.
TEST(CudaUpdateArithmetic, LionElementIsTheCpuBitwise) {
  const optim::LionHyper sets[] = {{1e-3, 0.9, 0.99, 0.0}, {3e-2, 0.5, 0.0, 0.3}};
  for (const optim::LionHyper& h : sets) {
    for (DT gdt : {DT::f32, DT::bf16, DT::f16}) {
      for (int copy = 0; copy < 3; ++copy) {
        const DT hdt = copy == 2 ? DT::f16 : DT::bf16;
        SCOPED_TRACE("wd " + std::to_string(h.weight_decay) + ", grad " + dt_name(gdt) +
                     (copy ? ", copy " + dt_name(hdt) : ", no copy"));
        std::mt19937 rng(7u + static_cast<unsigned>(copy));
        std::vector<float> p = draw(rng, 1.0), m = draw(rng, 0.01);
        std::vector<float> p_ref = p, m_ref = m;
        std::vector<std::uint16_t> p16(kN, 0xdeadu);
        for (std::int64_t step = 1; step <= 3; ++step) {
          const Grad g = make_grad(rng, gdt, 0.1);
          optim::lion_step(p_ref.data(), g.wide.data(), m_ref.data(), kN, h, step, 0.5f);
          const optim::detail::LionConsts c = optim::detail::lion_consts(h, step, 0.5f);
          for (std::size_t i = 0; i < kN; ++i)
            lion_at(static_cast<std::int64_t>(i), p.data(), g.raw(), g.dt, m.data(),
                    copy ? p16.data() : nullptr, hdt, c);
          ASSERT_TRUE(same_bits("master", p, p_ref));
          ASSERT_TRUE(same_bits("m", m, m_ref));
          if (copy) {
            ASSERT_TRUE(same_u16("param16", p16, rounded_copy(p_ref, hdt)));
          }
        }
      }
    }
  }
}

// The 8-bit kernels' byte search (q8_byte over q8_code's thresholds) is the CPU quantizer's:
// against quantize_reference (the exact nearest-code search) and quantize_block, over the codes'
// values, every threshold and its neighbours, 0, ±1, subnormals, and random values per decade.
TEST(CudaUpdateArithmetic, Q8ByteIsTheCpuQuantizer) {
  std::mt19937 rng(5);
  for (const optim::QuantMap map :
       {optim::QuantMap::signed_dynamic, optim::QuantMap::unsigned_dynamic}) {
    const Q8Code c = q8_code(map);
    const bool sgn = map == optim::QuantMap::signed_dynamic;
    ASSERT_EQ(c.k, sgn ? 128 : 255);  // 0, 127 decade values and 1: 129 magnitudes (signed)
    std::vector<float> ys = {0.0f, -0.0f, 1.0f, -1.0f, 1e-41f, -1e-41f, 0.5f, -0.5f};
    for (float v : optim::quant_sorted_values(map)) ys.push_back(v);
    for (float t : optim::quant_thresholds(map))
      for (float y : {t, std::nextafter(t, 0.0f), std::nextafter(t, 2.0f)}) {
        ys.push_back(y);
        ys.push_back(-y);
      }
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int k = 0; k < 40000; ++k) ys.push_back(u(rng) * std::pow(10.0f, -static_cast<float>(k % 8)));
    for (float y : ys) {
      const float x[2] = {y, 1.0f};  // absmax 1: the block quantizes y itself
      std::uint8_t fast[2];
      optim::quantize_block(map, x, 2, fast);
      const std::uint8_t got = q8_byte(c.thresholds, c.k, sgn, y);
      ASSERT_EQ(got, optim::quantize_reference(map, y)) << "y = " << y << " (" << hex(bits(y)) << ")";
      ASSERT_EQ(got, fast[0]) << "y = " << y;
    }
    for (int b = 0; b < 256; ++b)
      ASSERT_EQ(bits(c.values[b]), bits(optim::quant_values(map)[static_cast<std::size_t>(b)]));
  }
}

// The host primitives are single IEEE operations: a product followed by a sum is rounded twice
// (a fused multiply-add would give another value here), and fma rounds once.
TEST(CudaUpdateArithmetic, HostPrimitivesRoundEachOperation) {
  // x*x = 1 + 2^-12 + 2^-26 exactly: rounded on its own it is 1 + 2^-12, and minus 1 gives 2^-12;
  // fused with the subtraction it gives 2^-12 + 2^-26.
  const float x = 1.0f + std::ldexp(1.0f, -13);
  EXPECT_EQ(ieee::add(ieee::mul(x, x), -1.0f), std::ldexp(1.0f, -12));
  EXPECT_EQ(ieee::sub(ieee::mul(x, x), 1.0f), std::ldexp(1.0f, -12));
  EXPECT_EQ(ieee::fma(x, x, -1.0f), std::ldexp(1.0f, -12) + std::ldexp(1.0f, -26));
  EXPECT_EQ(ieee::div(1.0f, 3.0f), 1.0f / 3.0f);
  EXPECT_EQ(ieee::sqrt(2.0f), std::sqrt(2.0f));
}

}  // namespace test_cuda_update
}  // namespace
}  // namespace strata::cuda_ops
