#include "launcher/job/tfevents.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "framework/core/error.hpp"

namespace strata::job {

namespace {

constexpr std::array<std::uint32_t, 256> crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = crc_table();

// Protocol buffer encoding: varints, keys (field << 3 | wire type), length-delimited fields.
void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void fixed(std::string& out, const void* p, std::size_t n) {
  out.append(static_cast<const char*>(p), n);  // little-endian on the machines Strata runs on
}
void bytes_field(std::string& out, int field, const std::string& v) {
  varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
  varint(out, v.size());
  out += v;
}

std::string event(double wall_time, std::int64_t step) {
  std::string e;
  varint(e, 1 << 3 | 1);  // wall_time: double
  fixed(e, &wall_time, 8);
  varint(e, 2 << 3 | 0);  // step: int64
  varint(e, static_cast<std::uint64_t>(step));
  return e;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Cursor {
  const std::string& s;
  std::size_t at = 0;
  bool ok = true;
  bool done() const { return at >= s.size(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= s.size()) break;
      const auto b = static_cast<unsigned char>(s[at++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  std::string take(std::size_t n) {
    if (n > s.size() - at) {
      ok = false;
      return {};
    }
    std::string out = s.substr(at, n);
    at += n;
    return out;
  }
  void skip(int wire) {
    if (wire == 0) varint();
    else if (wire == 1) take(8);
    else if (wire == 2) take(varint());
    else if (wire == 5) take(4);
    else ok = false;
  }
};

void decode_value(const std::string& v, TfEvent& e) {
  Cursor c{v};
  std::string tag;
  float value = 0;
  while (c.ok && !c.done()) {
    const auto key = c.varint();
    if (key == (1 << 3 | 2)) tag = c.take(c.varint());
    else if (key == (2 << 3 | 5)) std::memcpy(&value, c.take(4).data(), 4);
    else c.skip(static_cast<int>(key & 7));
  }
  e.scalars.emplace_back(tag, value);
}

bool decode_event(const std::string& s, TfEvent& e) {
  Cursor c{s};
  while (c.ok && !c.done()) {
    const auto key = c.varint();
    if (key == (1 << 3 | 1)) {
      const std::string b = c.take(8);
      if (c.ok) std::memcpy(&e.wall_time, b.data(), 8);
    } else if (key == (2 << 3 | 0)) {
      e.step = static_cast<std::int64_t>(c.varint());
    } else if (key == (3 << 3 | 2)) {
      e.file_version = c.take(c.varint());
    } else if (key == (5 << 3 | 2)) {
      const std::string summary = c.take(c.varint());
      Cursor v{summary};
      while (c.ok && v.ok && !v.done()) {
        const auto vkey = v.varint();
        if (vkey == (1 << 3 | 2)) decode_value(v.take(v.varint()), e);
        else v.skip(static_cast<int>(vkey & 7));
      }
      c.ok = c.ok && v.ok;
    } else {
      c.skip(static_cast<int>(key & 7));
    }
  }
  return c.ok;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) c = kCrcTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t n) {
  const std::uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TfEventsWriter::TfEventsWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) user_fail("monitor", "cannot create the TensorBoard folder {}: {}", dir, ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", dir, static_cast<std::int64_t>(now_s()),
                      host, ::getpid());
  f_ = std::fopen(path_.c_str(), "wb");
  if (!f_) user_fail("monitor", "cannot create {}: {}", path_, std::strerror(errno));
  std::string first = event(now_s(), 0);
  bytes_field(first, 3, "brain.Event:2");
  record(first);
}

TfEventsWriter::~TfEventsWriter() {
  if (f_) std::fclose(f_);
}

void TfEventsWriter::record(const std::string& e) {
  const std::uint64_t len = e.size();
  const std::uint32_t len_crc = masked_crc32c(&len, 8), crc = masked_crc32c(e.data(), e.size());
  const bool ok = std::fwrite(&len, 8, 1, f_) == 1 && std::fwrite(&len_crc, 4, 1, f_) == 1 &&
                  std::fwrite(e.data(), 1, e.size(), f_) == e.size() &&
                  std::fwrite(&crc, 4, 1, f_) == 1 && std::fflush(f_) == 0;
  if (!ok) user_fail("monitor", "cannot write {}: {}", path_, std::strerror(errno));
}

void TfEventsWriter::scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    bytes_field(value, 1, tag);
    varint(value, 2 << 3 | 5);  // simple_value: float
    const float f = static_cast<float>(v);
    fixed(value, &f, 4);
    bytes_field(summary, 1, value);
  }
  std::string e = event(now_s(), step);
  bytes_field(e, 5, summary);
  record(e);
}

std::vector<TfEvent> read_tfevents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) user_fail("monitor", "cannot open {}", path);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<TfEvent> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t n = out.size();
    if (s.size() - at < 12) user_fail("monitor", "{}: record {} is cut short", path, n);
    std::uint64_t len;
    std::uint32_t len_crc, crc;
    std::memcpy(&len, s.data() + at, 8);
    std::memcpy(&len_crc, s.data() + at + 8, 4);
    if (len_crc != masked_crc32c(&len, 8)) user_fail("monitor", "{}: record {}: bad length CRC", path, n);
    if (s.size() - at - 12 < len + 4) user_fail("monitor", "{}: record {} is cut short", path, n);
    const std::string data = s.substr(at + 12, len);
    std::memcpy(&crc, s.data() + at + 12 + len, 4);
    if (crc != masked_crc32c(data.data(), data.size()))
      user_fail("monitor", "{}: record {}: bad data CRC", path, n);
    TfEvent e;
    if (!decode_event(data, e)) user_fail("monitor", "{}: record {} is not an Event", path, n);
    out.push_back(std::move(e));
    at += 12 + len + 4;
  }
  return out;
}

}  // namespace strata::job
