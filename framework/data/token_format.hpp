// The on-disk layout of a Strata token file: a 64-byte little-endian header followed by
// token_count tokens of 2 or 4 bytes each (see docs/data.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::data {

inline constexpr std::size_t kTokenHeaderBytes = 64;
inline constexpr char kTokenMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'T', 'K'};
inline constexpr std::uint32_t kTokenFormatVersion = 1;
// Largest vocabulary a token file may declare: every token then fits an int32.
inline constexpr std::uint64_t kMaxVocabSize = std::uint64_t{1} << 31;

struct TokenFileHeader {
  std::uint32_t version = kTokenFormatVersion;
  std::uint32_t bytes_per_token = 2;  // 2 (u16) or 4 (u32)
  std::uint64_t token_count = 0;
  std::uint64_t vocab_size = 0;

  // File size the header implies: 64 + token_count * bytes_per_token.
  std::uint64_t expected_file_size() const;
};

// FNV-1a 64 of the header's first 32 bytes (magic..vocab_size), stored at offset 32.
std::uint64_t header_checksum(const unsigned char* first32);

// Serialises a header (magic, fields, checksum, zero padding).
std::array<unsigned char, kTokenHeaderBytes> encode_header(const TokenFileHeader& h);

// Parses and validates the 64 header bytes of `path` (magic, version, checksum, bytes per
// token, vocabulary, reserved bytes). Throws UserError tagged "data" naming the file.
TokenFileHeader decode_header(const unsigned char* bytes, const std::string& path);

// Checks the fields a writer is about to use; throws UserError("data") when they are invalid.
void check_token_layout(std::uint32_t bytes_per_token, std::uint64_t vocab_size,
                        const std::string& path);

}  // namespace strata::data
