// Checksums of checkpoint datasets: CRC-32 (zlib's, the same as Python's zlib.crc32) written as
// "crc32:1a2b3c4d" so a tool can tell the algorithm from the value. Computed with carry-less
// multiplication (PCLMULQDQ) where the CPU has it, ~10x zlib's table code, and fused with a copy
// so that staging or reading a buffer checksums it in the same pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::checkpoint {

// CRC-32 of n bytes, continuing from `seed` (0 to start).
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t seed = 0);
// Copies n bytes from src to dst (which must not overlap) and returns their CRC-32, continuing
// from `seed`: one pass over the data instead of a memcpy and a crc32.
std::uint32_t crc32_copy(void* dst, const void* src, std::size_t n, std::uint32_t seed = 0);
// Which implementation crc32 uses on this CPU: "pclmul" or "zlib".
const char* crc32_implementation();
// "crc32:%08x".
std::string format_checksum(std::uint32_t crc);
// Inverse of format_checksum; nullopt for anything else.
std::optional<std::uint32_t> parse_checksum(std::string_view text);

}  // namespace strata::checkpoint
