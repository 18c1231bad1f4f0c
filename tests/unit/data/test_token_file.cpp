#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "framework/core/error.hpp"
#include "framework/data/token_file.hpp"
#include "framework/data/token_writer.hpp"
#include "temp_dir.hpp"

namespace strata::data {
namespace {

using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

// Expects `f` to throw UserError whose message contains every string in `parts`.
template <typename F>
void expect_user_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL() << "no exception";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("[data]", 0), 0u) << what;
    for (const auto& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

std::string make_file(const TempDir& dir, const std::string& name, std::uint32_t bpt,
                      std::uint64_t vocab, const std::vector<std::uint32_t>& tokens) {
  const std::string path = dir / name;
  TokenFileWriter w(path, bpt, vocab);
  w.append(tokens);
  w.commit();
  return path;
}

TEST(TokenFile, RoundTripU16) {
  TempDir dir;
  std::vector<std::uint32_t> tokens(5000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 7919) % 50000;
  const std::string path = dir / "a.tok";
  {
    TokenFileWriter w(path, 2, 50000);
    w.append(std::span<const std::uint32_t>(tokens).first(1234));  // several appends
    w.append(tokens[1234]);
    w.append(std::span<const std::uint32_t>(tokens).subspan(1235));
    EXPECT_EQ(w.count(), tokens.size());
    EXPECT_TRUE(std::filesystem::exists(w.temp_path()));
    EXPECT_FALSE(std::filesystem::exists(path));  // nothing under the final name before commit
    w.commit();
    EXPECT_FALSE(std::filesystem::exists(w.temp_path()));
  }
  EXPECT_EQ(std::filesystem::file_size(path), 64 + 2 * tokens.size());
  TokenFile f(path, /*check_all_tokens=*/true);
  EXPECT_EQ(f.size(), tokens.size());
  EXPECT_EQ(f.vocab_size(), 50000u);
  EXPECT_EQ(f.bytes_per_token(), 2u);
  std::vector<std::int32_t> got(tokens.size());
  f.read(0, tokens.size(), got.data());
  for (std::size_t i = 0; i < tokens.size(); ++i)
    ASSERT_EQ(got[i], static_cast<std::int32_t>(tokens[i])) << i;
  EXPECT_EQ(f.at(4999), tokens[4999]);
  // The layout is little-endian at fixed offsets.
  const std::string bytes = read_bytes(path);
  EXPECT_EQ(bytes.substr(0, 8), "STRATATK");
  EXPECT_EQ(static_cast<unsigned char>(bytes[64]), tokens[0] & 0xff);
  EXPECT_EQ(static_cast<unsigned char>(bytes[65]), tokens[0] >> 8);
}

TEST(TokenFile, RoundTripU32LargeVocab) {
  TempDir dir;
  const std::vector<std::uint32_t> tokens = {0, 1, 65535, 65536, 99999, 70000, 3};
  const std::string path = make_file(dir, "b.tok", 4, 100000, tokens);
  TokenFile f(path, true);
  EXPECT_EQ(f.bytes_per_token(), 4u);
  std::vector<std::int32_t> got(3);
  f.read(2, 3, got.data());
  EXPECT_EQ(got, (std::vector<std::int32_t>{65535, 65536, 99999}));
}

TEST(TokenFile, EmptyFileIsValid) {
  TempDir dir;
  TokenFile f(make_file(dir, "e.tok", 2, 256, {}));
  EXPECT_EQ(f.size(), 0u);
}

TEST(TokenFile, WriterWithoutCommitLeavesNothing) {
  TempDir dir;
  const std::string path = dir / "c.tok";
  write_bytes(path, "old contents");
  {
    TokenFileWriter w(path, 2, 256);
    w.append(std::vector<std::uint32_t>{1, 2, 3});
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_bytes(path), "old contents");  // the previous file is untouched
}

TEST(TokenFile, WriterRejectsOutOfRangeToken) {
  TempDir dir;
  TokenFileWriter w(dir / "d.tok", 2, 256);
  w.append(std::vector<std::uint32_t>{1, 2});
  expect_user_error(
      [&] {
        w.append(std::vector<std::uint32_t>{3, 256});
      },
      {"token 256 at index 3", "vocabulary size 256"});
  EXPECT_EQ(w.count(), 2u);  // the rejected batch was not written
}

TEST(TokenFile, WriterRejectsBadLayout) {
  TempDir dir;
  expect_user_error([&] { TokenFileWriter w(dir / "x.tok", 3, 256); }, {"3 bytes per token"});
  expect_user_error([&] { TokenFileWriter w(dir / "x.tok", 2, 70000); }, {"does not fit u16"});
  expect_user_error([&] { TokenFileWriter w(dir / "x.tok", 4, 0); }, {"vocabulary size 0"});
}

TEST(TokenFile, TruncatedFileNamesExpectedAndActualSize) {
  TempDir dir;
  const std::string path = make_file(dir, "t.tok", 2, 256, std::vector<std::uint32_t>(100, 7));
  std::filesystem::resize_file(path, 64 + 150);
  expect_user_error([&] { TokenFile f(path); },
                    {"truncated", path, "100 tokens", "should be 264 bytes", "it is 214 bytes"});
}

TEST(TokenFile, TrailingBytesAreAnError) {
  TempDir dir;
  const std::string path = make_file(dir, "t.tok", 2, 256, std::vector<std::uint32_t>(10, 7));
  write_bytes(path, read_bytes(path) + "xx");
  expect_user_error([&] { TokenFile f(path); }, {"should be 84 bytes", "it is 86 bytes"});
}

TEST(TokenFile, TooShortForHeader) {
  TempDir dir;
  write_bytes(dir / "s.tok", "STRATATK");
  expect_user_error([&] { TokenFile f(dir / "s.tok"); }, {"too short", "8 bytes"});
}

TEST(TokenFile, BadMagic) {
  TempDir dir;
  write_bytes(dir / "m.tok", std::string(100, 'A'));
  expect_user_error([&] { TokenFile f(dir / "m.tok"); },
                    {"not a Strata token file", "AAAAAAAA", "STRATATK"});
}

TEST(TokenFile, WrongVersion) {
  TempDir dir;
  const std::string path = make_file(dir, "v.tok", 2, 256, {1, 2, 3});
  TokenFileHeader h;
  h.version = 2;
  h.bytes_per_token = 2;
  h.token_count = 3;
  h.vocab_size = 256;
  const auto hb = encode_header(h);  // valid checksum, version 2
  std::string bytes = read_bytes(path);
  bytes.replace(0, 64, reinterpret_cast<const char*>(hb.data()), 64);
  write_bytes(path, bytes);
  expect_user_error([&] { TokenFile f(path); }, {"version 2", "reads version 1"});
}

TEST(TokenFile, CorruptHeaderChecksum) {
  TempDir dir;
  const std::string path = make_file(dir, "k.tok", 2, 256, {1, 2, 3});
  std::string bytes = read_bytes(path);
  bytes[24] = 1;  // vocab_size 256 -> 257 without fixing the checksum
  write_bytes(path, bytes);
  expect_user_error([&] { TokenFile f(path); }, {"corrupt header", "checksum"});
}

TEST(TokenFile, MissingFile) {
  expect_user_error([&] { TokenFile f("/nonexistent/x.tok"); },
                    {"cannot open", "/nonexistent/x.tok"});
}

// A file whose header says vocabulary 10 but holds token 200 (written by hand).
std::string file_with_bad_token(const TempDir& dir) {
  const std::string path = make_file(dir, "r.tok", 2, 256, {1, 2, 200, 4});
  TokenFileHeader h;
  h.bytes_per_token = 2;
  h.token_count = 4;
  h.vocab_size = 10;
  const auto hb = encode_header(h);
  std::string bytes = read_bytes(path);
  bytes.replace(0, 64, reinterpret_cast<const char*>(hb.data()), 64);
  write_bytes(path, bytes);
  return path;
}

TEST(TokenFile, OutOfRangeTokenCheckedOnOpen) {
  TempDir dir;
  const std::string path = file_with_bad_token(dir);
  expect_user_error([&] { TokenFile f(path, true); },
                    {path, "token 200 at index 2", "vocabulary size 10"});
}

TEST(TokenFile, OutOfRangeTokenCheckedLazily) {
  TempDir dir;
  const std::string path = file_with_bad_token(dir);
  TokenFile f(path);  // opens: no full scan
  std::int32_t out[2];
  f.read(0, 2, out);  // the good tokens read fine
  EXPECT_EQ(out[1], 2);
  expect_user_error([&] { f.read(1, 2, out); }, {"token 200 at index 2", "vocabulary size 10"});
}

}  // namespace
}  // namespace strata::data
