#include "framework/checkpoint/checksum.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>

namespace strata::checkpoint {

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uLong crc = seed;
  while (n > 0) {  // zlib's length type may be 32-bit: feed at most 1 GiB at a time
    const std::size_t chunk = std::min<std::size_t>(n, std::size_t{1} << 30);
    crc = ::crc32(crc, p, static_cast<uInt>(chunk));
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
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
