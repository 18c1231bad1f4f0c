#include "framework/checkpoint/checksum.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_CRC32_PCLMUL 1
#endif

namespace strata::checkpoint {

namespace {

// zlib's table-driven CRC-32 (any length; zlib's length type may be 32-bit, so at most 1 GiB at
// a time).
std::uint32_t crc32_zlib(const unsigned char* p, std::size_t n, std::uint32_t seed) {
  uLong crc = seed;
  while (n > 0) {
    const std::size_t chunk = std::min<std::size_t>(n, std::size_t{1} << 30);
    crc = ::crc32(crc, p, static_cast<uInt>(chunk));
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

#ifdef STRATA_CRC32_PCLMUL

// CRC-32 (reflected polynomial 0x04C11DB7) by folding with carry-less multiplication: Gopal et
// al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009),
// with the bit-reflected constants of that paper (the same as Linux's crc32-pclmul and
// Chromium's zlib). Four 128-bit lanes fold 64 bytes per iteration; then one lane folds 16 bytes
// at a time; then 128 -> 64 -> 32 bits and a Barrett reduction. `crc` is the raw register
// (pre-inverted by the caller). n >= 64 and a multiple of 16. With Copy, every 16-byte block
// loaded is also stored to dst.
#define STRATA_CRC_TARGET __attribute__((target("pclmul,sse4.1"), always_inline)) inline

// Loads 16 bytes at src + off, storing them to dst + off too when Copy.
template <bool Copy>
STRATA_CRC_TARGET __m128i load16(unsigned char* dst, const unsigned char* src, std::size_t off) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + off));
  if constexpr (Copy) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + off), v);
  return v;
}

// x folded forward by the distance k (two 64-bit constants) and added to next.
STRATA_CRC_TARGET __m128i fold16(__m128i x, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(hi, next), lo);
}

// CRC-32 (reflected polynomial 0x04C11DB7) by folding with carry-less multiplication: Gopal et
// al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009),
// with the bit-reflected constants of that paper (the same as Linux's crc32-pclmul and
// Chromium's zlib). Four 128-bit lanes fold 64 bytes per iteration; then one lane folds 16 bytes
// at a time; then 128 -> 64 -> 32 bits and a Barrett reduction. `crc` is the raw register
// (pre-inverted by the caller). n >= 64 and a multiple of 16. With Copy, every 16-byte block
// loaded is also stored to dst.
template <bool Copy>
__attribute__((target("pclmul,sse4.1"))) std::uint32_t crc32_fold(unsigned char* dst,
                                                                  const unsigned char* src,
                                                                  std::size_t n,
                                                                  std::uint32_t crc) {
  alignas(16) static const std::uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const std::uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const std::uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const std::uint64_t poly[] = {0x01db710641, 0x01f7011641};
  __m128i x1 = load16<Copy>(dst, src, 0x00), x2 = load16<Copy>(dst, src, 0x10),
          x3 = load16<Copy>(dst, src, 0x20), x4 = load16<Copy>(dst, src, 0x30);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  std::size_t off = 64;
  for (; n - off >= 64; off += 64) {
    x1 = fold16(x1, k, load16<Copy>(dst, src, off));
    x2 = fold16(x2, k, load16<Copy>(dst, src, off + 0x10));
    x3 = fold16(x3, k, load16<Copy>(dst, src, off + 0x20));
    x4 = fold16(x4, k, load16<Copy>(dst, src, off + 0x30));
  }
  // Fold the four lanes into one, then the remaining 16-byte blocks into it.
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold16(x1, k, x2);
  x1 = fold16(x1, k, x3);
  x1 = fold16(x1, k, x4);
  for (; n - off >= 16; off += 16) x1 = fold16(x1, k, load16<Copy>(dst, src, off));
  // 128 -> 64 bits.
  const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i t = _mm_clmulepi64_si128(x1, k, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
  // 64 -> 32 bits.
  k = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  t = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k, 0x00), t);
  // Barrett reduction.
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), k, 0x00);
  x1 = _mm_xor_si128(x1, t);
  return static_cast<std::uint32_t>(_mm_extract_epi32(x1, 1));
}

bool have_pclmul() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return ok;
}

#endif

// The CRC of n bytes of src (copied to dst when Copy), continuing from seed.
template <bool Copy>
std::uint32_t crc32_any(unsigned char* dst, const unsigned char* src, std::size_t n,
                        std::uint32_t seed) {
#ifdef STRATA_CRC32_PCLMUL
  if (n >= 64 && have_pclmul()) {
    const std::size_t body = n & ~std::size_t{15};
    seed = ~crc32_fold<Copy>(dst, src, body, ~seed);
    src += body;
    if constexpr (Copy) dst += body;
    n -= body;
  }
#endif
  if constexpr (Copy) {
    // Without PCLMUL: copy and checksum in blocks small enough to stay in the L1/L2 cache.
    constexpr std::size_t kBlock = 16 * 1024;
    for (std::size_t off = 0; off < n; off += kBlock) {
      const std::size_t c = std::min(kBlock, n - off);
      std::memcpy(dst + off, src + off, c);
      seed = crc32_zlib(dst + off, c, seed);
    }
    return seed;
  } else {
    return crc32_zlib(src, n, seed);
  }
}

}  // namespace

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t seed) {
  return crc32_any<false>(nullptr, static_cast<const unsigned char*>(data), n, seed);
}

std::uint32_t crc32_copy(void* dst, const void* src, std::size_t n, std::uint32_t seed) {
  return crc32_any<true>(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                         n, seed);
}

const char* crc32_implementation() {
#ifdef STRATA_CRC32_PCLMUL
  if (have_pclmul()) return "pclmul";
#endif
  return "zlib";
}

std::string format_checksum(std::uint32_t crc) {
  return fmt::format("crc32:{:08x}", crc);
}

std::optional<std::uint32_t> parse_checksum(std::string_view text) {
  constexpr std::string_view prefix = "crc32:";
  if (text.size() != prefix.size() + 8 || text.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  std::uint32_t v = 0;
  for (char c : text.substr(prefix.size())) {
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else
      return std::nullopt;
  }
  return v;
}

}  // namespace strata::checkpoint
