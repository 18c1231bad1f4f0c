#include "framework/memory/size.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "framework/core/error.hpp"

namespace strata {

std::uint64_t parse_bytes(std::string_view text) {
  auto bad = [&]() -> std::uint64_t {
    user_fail("memory", "cannot read '{}' as a size: write a number and a unit such as 512MiB, "
              "2GiB, 1.5GB, 4096 or 64KB (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000)",
              text);
  };
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::size_t start = i;
  bool dot = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
    dot |= text[i] == '.';
    ++i;
  }
  if (i == start) return bad();
  const std::string num(text.substr(start, i - start));
  const double value = std::strtod(num.c_str(), nullptr);
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) break;
    unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(text[i]))));
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) return bad();
  double mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "kb") mult = 1e3;
  else if (unit == "mb") mult = 1e6;
  else if (unit == "gb") mult = 1e9;
  else if (unit == "tb") mult = 1e12;
  else if (unit == "kib" || unit == "k") mult = 1024.0;
  else if (unit == "mib" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  else return bad();
  const double bytes = value * mult;
  if (!std::isfinite(bytes) || bytes > 1.8e19) return bad();
  if (mult == 1 && dot) return bad();  // fractional bytes
  return static_cast<std::uint64_t>(std::llround(bytes));
}

std::string format_bytes(std::uint64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) return fmt::format("{} B", b);
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_bytes_ceil(std::uint64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) return fmt::format("{} B", b);
  int u = 0;
  double unit = 1;
  while (static_cast<double>(b) / unit >= 1024.0 && u < 5) {
    unit *= 1024.0;
    ++u;
  }
  // Hundredths of the unit, rounded up; then checked against the exact byte count (and raised a
  // hundredth while the value read back falls short of it).
  auto hundredths = static_cast<std::uint64_t>(std::ceil(static_cast<double>(b) / unit * 100.0));
  while (static_cast<std::uint64_t>(std::llround(static_cast<double>(hundredths) / 100.0 * unit)) < b)
    ++hundredths;
  return fmt::format("{}.{:02d} {}", hundredths / 100, static_cast<int>(hundredths % 100), units[u]);
}

std::string size_arg(std::uint64_t b) {
  std::string s = format_bytes_ceil(b);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

}  // namespace strata
