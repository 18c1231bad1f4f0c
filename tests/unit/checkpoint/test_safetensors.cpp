// The safetensors reader/writer: round trip of F32/BF16/F16 tensors and metadata, a file written
// by Hugging Face's own library, and one-line errors for every kind of malformed header.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/safetensors.hpp"
#include "framework/core/half.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;
using testing::throws_with;

// A file made of a given header text and data bytes (header length prefixed).
std::string raw_file(const TempDir& tmp, const std::string& header, std::size_t data_bytes,
                     const std::string& name = "x.safetensors") {
  const std::string path = tmp / name;
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  f << std::string(data_bytes, '\x01');
  return path;
}

::testing::AssertionResult rejects(const std::string& path, const std::string& fragment) {
  try {
    SafetensorsReader r(path);
  } catch (const UserError& e) {
    const std::string what = e.what();
    if (what.find('\n') != std::string::npos)
      return ::testing::AssertionFailure() << "not one line: " << what;
    if (what.find(path) == std::string::npos)
      return ::testing::AssertionFailure() << "does not name the file: " << what;
    if (what.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << "lacks «" << fragment << "»: " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a UserError: " << e.what();
  }
  return ::testing::AssertionFailure() << "accepted";
}

TEST(Safetensors, WriteReadRoundTrip) {
  TempDir tmp;
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  std::vector<std::uint16_t> b(4), h(3);
  const std::vector<float> bf = {1.0f, -3.5f, 0.15625f, 100.0f}, hf = {0.5f, -0.25f, 2.0f};
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(bf[i]);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = f32_to_f16(hf[i]);
  const std::string path = tmp / "t.safetensors";
  write_safetensors(path,
                    {{"a.weight", DType::f32, {2, 3}, a.data()},
                     {"b", DType::bf16, {4}, b.data()},
                     {"h", DType::f16, {1, 3}, h.data()},
                     {"empty", DType::f32, {0, 5}, nullptr}},
                    {{"format", "pt"}});
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::ifstream in(path, std::ios::binary);
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u) << "the data must start 8-byte aligned";

  SafetensorsReader r(path);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  ASSERT_EQ(r.entries().size(), 4u);
  const SafetensorsEntry* ea = r.find("a.weight");
  ASSERT_NE(ea, nullptr);
  EXPECT_EQ(ea->dtype, "F32");
  EXPECT_EQ(ea->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(r.read_f32(*ea), a);
  EXPECT_EQ(r.read_f32(*r.find("b")), bf);
  EXPECT_EQ(r.read_f32(*r.find("h")), hf);
  const auto bytes = r.read_bytes(*r.find("b"));
  ASSERT_EQ(bytes.size(), 8u);
  EXPECT_EQ(std::memcmp(bytes.data(), b.data(), 8), 0);
  EXPECT_EQ(r.find("empty")->numel(), 0);
  EXPECT_EQ(r.find("nope"), nullptr);
}

TEST(Safetensors, ReadsAFileWrittenByHuggingFace) {
  SafetensorsReader r(std::string(STRATA_SOURCE_DIR) +
                      "/tests/fixtures/hf_gpt2_tiny/model.safetensors");
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.entries().size(), 2u + 2 * 12 + 2);
  const SafetensorsEntry* e = r.find("transformer.h.0.attn.c_attn.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, "F32");
  EXPECT_EQ(e->shape, (std::vector<std::int64_t>{32, 96}));
}

TEST(Safetensors, RejectsMalformedFilesInOneLine) {
  TempDir tmp;
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_NO_THROW(SafetensorsReader(raw_file(tmp, ok, 8)));
  {
    const std::string p = tmp / "short";
    std::ofstream(p) << "abc";
    EXPECT_TRUE(rejects(p, "too short"));
  }
  {
    const std::string p = tmp / "len";
    std::ofstream f(p, std::ios::binary);
    const std::uint64_t n = 1000;
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
    f.close();
    EXPECT_TRUE(rejects(p, "header length 1000 does not fit the file"));
  }
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":)", 0), "not valid JSON"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"([1, 2])", 0), "does not start with '{'"));
  EXPECT_TRUE(rejects(
      raw_file(
          tmp,
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          8),
      "names 'a' twice"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8),
                      "unknown dtype 'F33'"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                      "is F32 [3] (12 bytes) but data_offsets [0, 8] hold 8 bytes"));
  EXPECT_TRUE(
      rejects(raw_file(tmp, R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
              "dimensions must be non-negative integers"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
                      "end before begin"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                      "past the end of the data"));
  EXPECT_TRUE(rejects(
      raw_file(
          tmp,
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          8),
      "overlap"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                      "bytes [0, 4) before tensor 'a' belong to no tensor"));
  EXPECT_TRUE(rejects(raw_file(tmp, ok, 12), "4 bytes after the last tensor"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"__metadata__":{"format":1}})", 0),
                      "__metadata__ 'format' is not a string"));
  EXPECT_TRUE(rejects(
      raw_file(tmp, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8),
      "unknown field 'extra'"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":{"dtype":"F32","shape":[2]}})", 8), "data_offsets"));
  EXPECT_TRUE(rejects(raw_file(tmp, R"({"a":[1]})", 0), "not a JSON object"));
}

// A hostile header is refused before the JSON parser sees it: 100,000 nested arrays overflowed
// the parser's stack (issue #18), and a 100,000-digit number is not echoed whole.
TEST(Safetensors, DeepOrHugeHeadersAreRefusedBeforeParsing) {
  TempDir tmp;
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(rejects(raw_file(tmp, deep, 0, "deep.safetensors"), "nested more than 64 levels"));
  const std::string big = R"({"a":{"dtype":"F32","shape":[1)" + std::string(100000, '7') +
                          R"(],"data_offsets":[0,8]}})";
  const std::string p = raw_file(tmp, big, 8, "big.safetensors");
  EXPECT_TRUE(rejects(p, "a number of 100001 characters"));
  try {
    SafetensorsReader r(p);
  } catch (const UserError& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u);
  }
}

TEST(Safetensors, OnlyFloatTensorsReadAsWeights) {
  TempDir tmp;
  SafetensorsReader r(
      raw_file(tmp, R"({"n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
  EXPECT_EQ(r.read_bytes(r.entries().front()).size(), 8u);
  EXPECT_TRUE(throws_with<UserError>([&] { r.read_f32(r.entries().front()); },
                                     {"tensor 'n' is I64", "F32, BF16 and F16"}));
}

TEST(Safetensors, WriterRejectsDuplicatesAndOtherDtypes) {
  TempDir tmp;
  float x = 1;
  EXPECT_TRUE(throws_with<UserError>(
      [&] {
        write_safetensors(tmp / "d.safetensors",
                          {{"a", DType::f32, {1}, &x}, {"a", DType::f32, {1}, &x}});
      },
      {"'a' is written twice"}));
  EXPECT_TRUE(throws_with<UserError>(
      [&] {
        write_safetensors(tmp / "e.safetensors", {{"a", DType::f64, {1}, &x}});
      },
      {"f32, bf16 and f16"}));
  EXPECT_FALSE(std::filesystem::exists(tmp / "e.safetensors"));
}

}  // namespace
}  // namespace strata::checkpoint
