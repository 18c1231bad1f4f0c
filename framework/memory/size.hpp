// Byte sizes as people write them ("2GiB", "512 MB", "1.5G") and as we print them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

// Parses a byte size: a number (integer or decimal) and an optional unit B, KB/MB/GB/TB
// (powers of 1000), KiB/MiB/GiB/TiB (powers of 1024) or K/M/G/T (powers of 1024). Case of the
// unit is ignored. Throws UserError naming the text and the accepted forms.
std::uint64_t parse_bytes(std::string_view text);

// "1.50 GiB", "512 B", "3.00 KiB".
std::string format_bytes(std::uint64_t bytes);
// As format_bytes, rounded up to the last digit shown: parse_bytes of it (without the space) is
// at least `bytes`. For limits that must hold what was measured: "82.14 MiB" for 82.131 MiB.
std::string format_bytes_ceil(std::uint64_t bytes);
// format_bytes_ceil without the space, as a command-line value: "82.14MiB".
std::string size_arg(std::uint64_t bytes);

}  // namespace strata
