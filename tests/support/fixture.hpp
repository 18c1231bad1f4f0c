// Header-only reader (and small writer) for Strata's test fixture files (.fx), the named tensors
// written by tools/pytorch/make_gpt_fixtures.py that C++ tests compare against.
//
// File format (little-endian, no padding; version 1):
//   8 bytes  magic "STRATAFX"
//   u32      version = 1
//   u32      entry count
//   per entry:
//     u32    name length in bytes, then the name (UTF-8, no terminator)
//     u32    dtype: 0 = f32, 1 = i32, 2 = f64
//     u32    rank
//     rank x u64 dims (row-major, last dimension fastest)
//     data   prod(dims) elements of dtype (one element when rank == 0)
// Names are unique; names() keeps file order. The Python side is tools/pytorch/fixture_io.py.
// Errors throw std::runtime_error naming the file and, where there is one, the entry.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::test {

static_assert(std::endian::native == std::endian::little, "fixture files are little-endian");

enum class FixtureDType : std::uint32_t { F32 = 0, I32 = 1, F64 = 2 };

inline const char* fixture_dtype_name(FixtureDType d) {
  switch (d) {
    case FixtureDType::F32: return "f32";
    case FixtureDType::I32: return "i32";
    case FixtureDType::F64: return "f64";
  }
  return "?";
}

inline std::size_t fixture_dtype_size(FixtureDType d) { return d == FixtureDType::F64 ? 8 : 4; }

// A loaded fixture file: named tensors of f32 / i32 / f64.
class Fixture {
 public:
  static Fixture load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("[fixture] cannot open '" + path + "'");
    std::vector<unsigned char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return parse(buf, path);
  }

  // Parses an in-memory image of a fixture file; `path` is only used in error messages.
  static Fixture parse(const std::vector<unsigned char>& buf, const std::string& path) {
    Fixture fx;
    fx.path_ = path;
    Cursor c{buf, 0, path};
    if (buf.size() < 8 || std::memcmp(buf.data(), "STRATAFX", 8) != 0)
      throw std::runtime_error("[fixture] '" + path + "': bad magic (not a STRATAFX file)");
    c.pos = 8;
    const auto version = c.u32("header");
    if (version != 1)
      throw std::runtime_error("[fixture] '" + path + "': unsupported version " + std::to_string(version));
    const auto count = c.u32("header");
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::string where = "entry #" + std::to_string(i);
      const auto name_len = c.u32(where);
      c.need(name_len, where);
      std::string name(reinterpret_cast<const char*>(buf.data() + c.pos), name_len);
      c.pos += name_len;
      const std::string ctx = "entry '" + name + "'";
      const auto code = c.u32(ctx);
      if (code > 2)
        throw std::runtime_error("[fixture] '" + path + "': " + ctx + ": unknown dtype code " +
                                 std::to_string(code));
      Entry e;
      e.dtype = static_cast<FixtureDType>(code);
      const auto rank = c.u32(ctx);
      std::uint64_t numel = 1;
      for (std::uint32_t d = 0; d < rank; ++d) {
        const auto dim = c.u64(ctx);
        if (dim != 0 && numel > (buf.size() / dim))  // cannot fit in the file: reject before overflow
          throw std::runtime_error("[fixture] '" + path + "': " + ctx + ": dims exceed the file size");
        numel *= dim;
        e.shape.push_back(dim);
      }
      const std::uint64_t bytes = numel * fixture_dtype_size(e.dtype);
      c.need(bytes, ctx);
      e.data.assign(buf.begin() + static_cast<std::ptrdiff_t>(c.pos),
                    buf.begin() + static_cast<std::ptrdiff_t>(c.pos + bytes));
      c.pos += bytes;
      if (!fx.entries_.emplace(name, std::move(e)).second)
        throw std::runtime_error("[fixture] '" + path + "': duplicate " + ctx);
      fx.names_.push_back(std::move(name));
    }
    if (c.pos != buf.size())
      throw std::runtime_error("[fixture] '" + path + "': " + std::to_string(buf.size() - c.pos) +
                               " trailing bytes after " + std::to_string(count) + " entries");
    return fx;
  }

  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }  // in file order
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  const std::vector<std::uint64_t>& shape(const std::string& name) const { return entry(name).shape; }
  FixtureDType dtype(const std::string& name) const { return entry(name).dtype; }
  std::size_t numel(const std::string& name) const {
    const auto& e = entry(name);
    return e.data.size() / fixture_dtype_size(e.dtype);
  }

  // The entry's elements; the entry must have exactly that dtype (no silent conversion).
  std::vector<float> f32(const std::string& name) const { return values<float>(name, FixtureDType::F32); }
  std::vector<std::int32_t> i32(const std::string& name) const {
    return values<std::int32_t>(name, FixtureDType::I32);
  }
  std::vector<double> f64(const std::string& name) const { return values<double>(name, FixtureDType::F64); }

  // A one-element entry of any dtype (rank 0, or all dims 1), as double.
  double scalar(const std::string& name) const {
    const auto& e = entry(name);
    if (e.data.size() != fixture_dtype_size(e.dtype))
      throw std::runtime_error("[fixture] '" + path_ + "': entry '" + name + "' has " +
                               std::to_string(numel(name)) + " elements, expected a scalar");
    switch (e.dtype) {
      case FixtureDType::F32: return f32(name)[0];
      case FixtureDType::I32: return i32(name)[0];
      case FixtureDType::F64: return f64(name)[0];
    }
    return 0.0;
  }

 private:
  struct Entry {
    FixtureDType dtype = FixtureDType::F32;
    std::vector<std::uint64_t> shape;
    std::vector<unsigned char> data;
  };
  struct Cursor {
    const std::vector<unsigned char>& buf;
    std::size_t pos;
    const std::string& path;
    void need(std::uint64_t n, const std::string& what) const {
      if (n > buf.size() - pos)
        throw std::runtime_error("[fixture] '" + path + "': truncated in " + what + " (needs " +
                                 std::to_string(n) + " bytes at offset " + std::to_string(pos) + ", file has " +
                                 std::to_string(buf.size()) + ")");
    }
    template <class T>
    T read(const std::string& what) {
      need(sizeof(T), what);
      T v;
      std::memcpy(&v, buf.data() + pos, sizeof(T));
      pos += sizeof(T);
      return v;
    }
    std::uint32_t u32(const std::string& what) { return read<std::uint32_t>(what); }
    std::uint64_t u64(const std::string& what) { return read<std::uint64_t>(what); }
  };

  const Entry& entry(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end())
      throw std::runtime_error("[fixture] '" + path_ + "': no entry '" + name + "'");
    return it->second;
  }

  template <class T>
  std::vector<T> values(const std::string& name, FixtureDType want) const {
    const auto& e = entry(name);
    if (e.dtype != want)
      throw std::runtime_error("[fixture] '" + path_ + "': entry '" + name + "' is " +
                               fixture_dtype_name(e.dtype) + ", read as " + fixture_dtype_name(want));
    std::vector<T> out(e.data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), e.data.data(), e.data.size());
    return out;
  }

  std::string path_;
  std::vector<std::string> names_;
  std::map<std::string, Entry> entries_;
};

// Builds a fixture file in memory (for tests that write their own, or to dump C++ results).
class FixtureWriter {
 public:
  void add_f32(const std::string& name, std::vector<std::uint64_t> shape, const std::vector<float>& v) {
    add(name, FixtureDType::F32, std::move(shape), v.data(), v.size());
  }
  void add_i32(const std::string& name, std::vector<std::uint64_t> shape, const std::vector<std::int32_t>& v) {
    add(name, FixtureDType::I32, std::move(shape), v.data(), v.size());
  }
  void add_f64(const std::string& name, std::vector<std::uint64_t> shape, const std::vector<double>& v) {
    add(name, FixtureDType::F64, std::move(shape), v.data(), v.size());
  }

  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> out{'S', 'T', 'R', 'A', 'T', 'A', 'F', 'X'};
    put<std::uint32_t>(out, 1);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(body_count_));
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }

  void save(const std::string& path) const {
    const auto b = bytes();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("[fixture] cannot write '" + path + "'");
  }

 private:
  template <class T>
  static void put(std::vector<unsigned char>& out, T v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }

  void add(const std::string& name, FixtureDType dt, std::vector<std::uint64_t> shape, const void* data,
           std::size_t n) {
    std::uint64_t numel = 1;
    for (auto d : shape) numel *= d;
    if (numel != n)
      throw std::runtime_error("[fixture] entry '" + name + "': shape has " + std::to_string(numel) +
                               " elements, data has " + std::to_string(n));
    for (const auto& s : names_)
      if (s == name) throw std::runtime_error("[fixture] duplicate entry '" + name + "'");
    names_.push_back(name);
    put<std::uint32_t>(body_, static_cast<std::uint32_t>(name.size()));
    body_.insert(body_.end(), name.begin(), name.end());
    put<std::uint32_t>(body_, static_cast<std::uint32_t>(dt));
    put<std::uint32_t>(body_, static_cast<std::uint32_t>(shape.size()));
    for (auto d : shape) put<std::uint64_t>(body_, d);
    const auto* p = static_cast<const unsigned char*>(data);
    body_.insert(body_.end(), p, p + n * fixture_dtype_size(dt));
    ++body_count_;
  }

  std::vector<std::string> names_;
  std::vector<unsigned char> body_;
  std::size_t body_count_ = 0;
};

}  // namespace strata::test
