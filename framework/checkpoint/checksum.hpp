// Checksums of checkpoint datasets: CRC-32 (zlib's, the same as Python's zlib.crc32) written as
// "crc32:1a2b3c4d" so a tool can tell the algorithm from the value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::checkpoint {

// CRC-32 of n bytes, continuing from `seed` (0 to start).
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t seed = 0);
// "crc32:%08x".
std::string format_checksum(std::uint32_t crc);
// Inverse of format_checksum; nullopt for anything else.
std::optional<std::uint32_t> parse_checksum(std::string_view text);

}  // namespace strata::checkpoint
