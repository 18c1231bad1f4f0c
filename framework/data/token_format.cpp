#include "framework/data/token_format.hpp"

#include <cstring>

#include "framework/core/error.hpp"

namespace strata::data {

namespace {

void put_u32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get_u32(const unsigned char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string printable(const unsigned char* p, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f)
      s += static_cast<char>(p[i]);
    else
      s += fmt::format("\\x{:02x}", p[i]);
  }
  return s;
}

}  // namespace

std::uint64_t TokenFileHeader::expected_file_size() const {
  return kTokenHeaderBytes + token_count * bytes_per_token;
}

std::uint64_t header_checksum(const unsigned char* first32) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 32; ++i) {
    h ^= first32[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::array<unsigned char, kTokenHeaderBytes> encode_header(const TokenFileHeader& h) {
  std::array<unsigned char, kTokenHeaderBytes> b{};
  std::memcpy(b.data(), kTokenMagic, 8);
  put_u32(b.data() + 8, h.version);
  put_u32(b.data() + 12, h.bytes_per_token);
  put_u64(b.data() + 16, h.token_count);
  put_u64(b.data() + 24, h.vocab_size);
  put_u64(b.data() + 32, header_checksum(b.data()));
  return b;
}

void check_token_layout(std::uint32_t bytes_per_token, std::uint64_t vocab_size,
                        const std::string& path) {
  if (bytes_per_token != 2 && bytes_per_token != 4) {
    user_fail("data",
              "token file '{}': {} bytes per token (a token file holds u16 or u32 tokens: 2 or 4)",
              path, bytes_per_token);
  }
  if (vocab_size == 0 || vocab_size > kMaxVocabSize) {
    user_fail("data", "token file '{}': vocabulary size {} (must be in [1, 2^31])", path,
              vocab_size);
  }
  if (bytes_per_token == 2 && vocab_size > 65536) {
    user_fail(
        "data",
        "token file '{}': vocabulary size {} does not fit u16 tokens (at most 65536); use u32",
        path, vocab_size);
  }
}

TokenFileHeader decode_header(const unsigned char* b, const std::string& path) {
  if (std::memcmp(b, kTokenMagic, 8) != 0) {
    user_fail("data",
              "'{}' is not a Strata token file: it starts with \"{}\", expected magic \"STRATATK\" "
              "(make one with `strata data prepare`)",
              path, printable(b, 8));
  }
  TokenFileHeader h;
  h.version = get_u32(b + 8);
  if (h.version != kTokenFormatVersion) {
    user_fail("data", "token file '{}' has format version {}; this build reads version {}", path,
              h.version, kTokenFormatVersion);
  }
  const std::uint64_t stored = get_u64(b + 32);
  const std::uint64_t computed = header_checksum(b);
  if (stored != computed) {
    user_fail("data", "token file '{}' has a corrupt header (checksum {:016x}, computed {:016x})",
              path, stored, computed);
  }
  for (std::size_t i = 40; i < kTokenHeaderBytes; ++i) {
    if (b[i] != 0) {
      user_fail("data", "token file '{}': reserved header byte {} is {:#04x}, expected 0", path, i,
                b[i]);
    }
  }
  h.bytes_per_token = get_u32(b + 12);
  h.token_count = get_u64(b + 16);
  h.vocab_size = get_u64(b + 24);
  check_token_layout(h.bytes_per_token, h.vocab_size, path);
  if (h.token_count > (std::uint64_t{1} << 60) / h.bytes_per_token) {
    user_fail("data", "token file '{}': token count {} is implausibly large (corrupt header?)",
              path, h.token_count);
  }
  return h;
}

}  // namespace strata::data
