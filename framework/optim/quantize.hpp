// Block-wise dynamic 8-bit quantization (Dettmers et al. 2021, "8-bit Optimizers via Block-wise
// Quantization"): a buffer is cut into blocks of kQuantBlock elements, each stored as one f32
// absmax (max |x| over the block) and one byte per element indexing a non-linear code of 256
// values in [-1, 1] (signed, for AdamW's m) or [0, 1] (unsigned, for its v).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "framework/optim/simd.hpp"

namespace strata::optim {

// Elements per quantization block (bitsandbytes' block size for 8-bit optimizer state).
inline constexpr std::size_t kQuantBlock = 2048;

// The dynamic ("tree") code of bitsandbytes' create_dynamic_map with 7 exponent bits: for
// decade i = 0..6 (values 10^(i-6) × [0.1, 1]) the midpoints of 2^i (signed) or 2^(i+1)
// (unsigned) equal intervals of [0.1, 1], scaled by 10^(i-6); the signed code has each of them
// with both signs, plus 0 and 1.0 (127 + 127 + 2 = 256 values); the unsigned one 254 + 2. Values
// are computed in double and rounded to f32 (bitsandbytes computes them with torch's f32
// linspace; the two can differ in the last bit).
enum class QuantMap { signed_dynamic, unsigned_dynamic };

// The value each stored byte stands for. Byte 0 is exactly +0 in both codes, so a zeroed buffer
// with absmax 0 is the zero state (a fresh optimizer, a new swap file).
const std::array<float, 256>& quant_values(QuantMap map);
// The code's values in increasing order (tests, documentation).
std::vector<float> quant_sorted_values(QuantMap map);
// The thresholds between the code's magnitudes P[0] = 0 < P[1] < ... < P[K] = 1 (K = 128 signed,
// 255 unsigned), increasing: T[j] is the midpoint of P[j] and P[j+1] rounded down to f32. The
// byte of y = x / absmax is found from mi = #{j : |y| > T[j]}, compared as the bit patterns of
// |y| and T[j] (so |y| NaN or above 1 gives mi = K): unsigned byte mi; signed byte
// (y's sign bit ? max(127 - mi, 0) : 127 + mi) ^ 127. Every quantizer path computes exactly this
// (the CUDA backend's 8-bit kernels search these thresholds).
std::vector<float> quant_thresholds(QuantMap map);

// Quantizes n <= kQuantBlock values that share one block: returns their absmax = max |x| and
// writes codes[i] = the byte whose value is nearest to x[i] / absmax (ties go to the smaller
// magnitude; the unsigned code quantizes |x|). absmax 0 (an all-zero block) gives byte 0
// everywhere. Non-finite inputs give unspecified codes (never out-of-range accesses).
// Error bound, per element: |x - dequantize(quantize(x))| <= absmax × (d(x / absmax) + 2^-23)
// + 2^-149 (the roundings of x / absmax and code × absmax; 2^-149 only matters for denormal
// blocks), where d(y) is the distance from y to the nearest code value (at most half the gap
// between the two values around y): for the signed code d <= 0.9/128 = 0.00703 (the top
// decade's half-gap, also the gap from -0.99297 to -1, which has no code), for the unsigned one
// d <= 0.9/256 = 0.00352 (both up to the f32 rounding of the values, 2^-24); relative to |x|
// the error is at most ~4.5 % of a decade's lower end down to 10^-6 × absmax, below which
// values quantize to 0 or the smallest code.
float quantize_block(QuantMap map, const float* x, std::size_t n, std::uint8_t* codes);
// out[i] = quant_values(map)[codes[i]] * absmax.
void dequantize_block(QuantMap map, const std::uint8_t* codes, std::size_t n, float absmax,
                      float* out);

// The same on a chosen path; every path gives bitwise the same bytes, absmax and values.
float quantize_block_on(SimdPath path, QuantMap map, const float* x, std::size_t n,
                        std::uint8_t* codes);
void dequantize_block_on(SimdPath path, QuantMap map, const std::uint8_t* codes, std::size_t n,
                         float absmax, float* out);

// Whole buffers: block b is elements [b·kQuantBlock, (b+1)·kQuantBlock) (the last one may be
// shorter); absmax has ceil(n / kQuantBlock) entries. Multi-threaded over blocks.
void quantize_blockwise(QuantMap map, const float* x, std::size_t n, std::uint8_t* codes,
                        float* absmax);
void dequantize_blockwise(QuantMap map, const std::uint8_t* codes, const float* absmax,
                          std::size_t n, float* out);

// The definition the fast paths reproduce: the byte for y = x / absmax in [-1, 1], found by an
// exact search of the sorted values (comparisons in double), ties to the smaller magnitude.
std::uint8_t quantize_reference(QuantMap map, float y);

// Number of quantization blocks of n elements.
inline constexpr std::size_t quant_blocks(std::size_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

}  // namespace strata::optim
