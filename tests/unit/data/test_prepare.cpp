#include <gtest/gtest.h>

#include <filesystem>

#include "framework/core/error.hpp"
#include "framework/data/corpus.hpp"
#include "framework/data/prepare.hpp"
#include "framework/data/token_file.hpp"
#include "temp_dir.hpp"

namespace strata::data {
namespace {
namespace test_prepare {  // file-local names, unique in a unity build

using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

std::string tokens_as_text(const TokenFile& f) {
  std::vector<std::int32_t> t(f.size());
  if (!t.empty()) f.read(0, t.size(), t.data());
  return std::string(t.begin(), t.end());
}

template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError>";
}

TEST(Prepare, ThreeFilesSortedOrderAndExactSplit) {
  TempDir dir;
  std::filesystem::create_directory(dir / "corpus");
  // Written out of order; names sort b < c < d... plus a nested folder "a/".
  write_bytes(dir / "corpus/c", "CCCCCCCCCC\n%\n");  // 13 bytes
  write_bytes(dir / "corpus/b", "bbb\n%\n");         // 6 bytes
  std::filesystem::create_directory(dir / "corpus/a");
  write_bytes(dir / "corpus/a/x", "axaxaxaxaxaxaxaxaxaxa\n%\n");  // 24 bytes
  PrepareOptions o;
  o.inputs = {dir / "corpus"};
  o.output_prefix = dir / "out/corpus";  // out/ is created
  o.val_fraction = 0.25;
  const PrepareResult r = prepare_corpus(o);
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.files[0], dir / "corpus/a/x");
  EXPECT_EQ(r.files[1], dir / "corpus/b");
  EXPECT_EQ(r.files[2], dir / "corpus/c");
  const std::string all =
      read_bytes(dir / "corpus/a/x") + read_bytes(dir / "corpus/b") + read_bytes(dir / "corpus/c");
  ASSERT_EQ(all.size(), 43u);
  EXPECT_EQ(r.val_tokens, 10u);  // floor(43 * 0.25)
  EXPECT_EQ(r.train_tokens, 33u);
  EXPECT_EQ(r.vocab_size, 256u);
  EXPECT_EQ(r.bytes_per_token, 2u);
  TokenFile train(r.train_path, true), val(r.val_path, true);
  EXPECT_EQ(r.train_path, dir / "out/corpus.train.tok");
  EXPECT_EQ(r.val_path, dir / "out/corpus.val.tok");
  EXPECT_EQ(train.vocab_size(), 256u);
  EXPECT_EQ(tokens_as_text(train), all.substr(0, 33));
  EXPECT_EQ(tokens_as_text(val), all.substr(33));
  EXPECT_FALSE(std::filesystem::exists(r.train_path + ".tmp"));
}

TEST(Prepare, IsDeterministicAndIndependentOfArgumentOrder) {
  TempDir dir;
  write_bytes(dir / "one", "first file\n");
  write_bytes(dir / "two", "second file\n");
  write_bytes(dir / "three", "third file\n");
  PrepareOptions o;
  o.inputs = {dir / "two", dir / "three", dir / "one"};
  o.output_prefix = dir / "p";
  o.val_fraction = 0.5;
  prepare_corpus(o);
  const std::string t1 = read_bytes(dir / "p.train.tok"), v1 = read_bytes(dir / "p.val.tok");
  o.inputs = {dir / "one", dir / "three", dir / "two"};
  const auto r = prepare_corpus(o);
  EXPECT_EQ(read_bytes(dir / "p.train.tok"), t1);
  EXPECT_EQ(read_bytes(dir / "p.val.tok"), v1);
  EXPECT_EQ(tokens_as_text(TokenFile(r.train_path)) + tokens_as_text(TokenFile(r.val_path)),
            "first file\nthird file\nsecond file\n");
}

TEST(Prepare, ZeroValidationFractionGivesEmptyValFile) {
  TempDir dir;
  write_bytes(dir / "t", "hello");
  PrepareOptions o;
  o.inputs = {dir / "t"};
  o.output_prefix = dir / "z";
  o.val_fraction = 0;
  const auto r = prepare_corpus(o);
  EXPECT_EQ(r.train_tokens, 5u);
  EXPECT_EQ(r.val_tokens, 0u);
  EXPECT_EQ(TokenFile(r.val_path).size(), 0u);
}

TEST(Prepare, DirectoryRulesSkipIndexesSymlinksHiddenAndOff) {
  TempDir dir;
  const std::string c = dir / "fortunes";
  std::filesystem::create_directories(c + "/off");
  write_bytes(c + "/art", "art\n%\n");
  write_bytes(c + "/art.dat", std::string("\x00\x00\x00\x02", 4));  // strfile index of art
  std::filesystem::create_symlink("art", c + "/art.u8");
  write_bytes(c + "/off/rude", "rude\n%\n");
  write_bytes(c + "/.hidden", "hidden");
  write_bytes(c + "/lonely.dat", "kept: no file 'lonely' beside it");
  const auto files = list_corpus_files({c});
  EXPECT_EQ(files, (std::vector<std::string>{c + "/art", c + "/lonely.dat"}));
}

TEST(Prepare, TokenizedU16Input) {
  TempDir dir;
  // Little-endian u16 tokens 1, 300, 999, 2 and 5, 6.
  write_bytes(dir / "a.bin", std::string("\x01\x00\x2c\x01\xe7\x03\x02\x00", 8));
  write_bytes(dir / "b.bin", std::string("\x05\x00\x06\x00", 4));
  PrepareOptions o;
  o.inputs = {dir / "b.bin", dir / "a.bin"};
  o.output_prefix = dir / "tok";
  o.val_fraction = 0.34;  // floor(6 * 0.34) = 2
  o.tokenized_dtype = "u16";
  o.vocab_size = 1000;
  const auto r = prepare_corpus(o);
  EXPECT_EQ(r.train_tokens, 4u);
  EXPECT_EQ(r.val_tokens, 2u);
  TokenFile train(r.train_path), val(r.val_path);
  EXPECT_EQ(train.vocab_size(), 1000u);
  std::vector<std::int32_t> t(4), v(2);
  train.read(0, 4, t.data());
  val.read(0, 2, v.data());
  EXPECT_EQ(t, (std::vector<std::int32_t>{1, 300, 999, 2}));
  EXPECT_EQ(v, (std::vector<std::int32_t>{5, 6}));
}

TEST(Prepare, TokenizedU32WithLargeVocabWritesU32) {
  TempDir dir;
  write_bytes(dir / "a.bin", std::string("\x01\x00\x01\x00\x02\x00\x00\x00", 8));  // 65537, 2
  PrepareOptions o;
  o.inputs = {dir / "a.bin"};
  o.output_prefix = dir / "big";
  o.val_fraction = 0;
  o.tokenized_dtype = "u32";
  o.vocab_size = 70000;
  const auto r = prepare_corpus(o);
  EXPECT_EQ(r.bytes_per_token, 4u);
  TokenFile f(r.train_path, true);
  EXPECT_EQ(f.at(0), 65537u);
}

TEST(Prepare, Errors) {
  TempDir dir;
  write_bytes(dir / "odd.bin", "abc");
  write_bytes(dir / "t", "text");
  PrepareOptions o;
  o.output_prefix = dir / "e";
  o.inputs = {dir / "odd.bin"};
  o.tokenized_dtype = "u16";
  o.vocab_size = 100;
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("3 bytes, not a whole number of u16"),
            std::string::npos);
  write_bytes(dir / "big.bin", std::string("\x01\x00\xc8\x00", 4));  // 1, 200
  o.inputs = {dir / "big.bin"};
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("token 200 at index 1 is out of range"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "e.train.tok"));  // no half output
  EXPECT_FALSE(std::filesystem::exists(dir / "e.train.tok.tmp"));
  o.vocab_size = 0;
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("--vocab-size"), std::string::npos);
  o.tokenized_dtype = "u8";
  o.vocab_size = 10;
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("'u8' is not u16 or u32"),
            std::string::npos);
  o.tokenized_dtype = "";
  o.vocab_size = 0;
  o.inputs = {dir / "t"};
  o.val_fraction = 1.0;
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("not in [0, 1)"), std::string::npos);
  o.val_fraction = 0.1;
  o.inputs = {dir / "missing"};
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("does not exist"), std::string::npos);
  o.inputs = {dir / "t", dir / "t"};
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("more than once"), std::string::npos);
  write_bytes(dir / "empty", "");
  o.inputs = {dir / "empty"};
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("no tokens"), std::string::npos);
}

TEST(Prepare, DefaultCorpusWhenInstalled) {
  if (!std::filesystem::is_directory(kDefaultCorpusDir)) GTEST_SKIP() << "fortunes not installed";
  const auto files = list_corpus_files({kDefaultCorpusDir});
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    EXPECT_FALSE(f.ends_with(".dat")) << f;
    EXPECT_FALSE(f.ends_with(".u8")) << f;
    EXPECT_EQ(f.find("/off/"), std::string::npos) << f;
    EXPECT_FALSE(std::filesystem::is_symlink(f)) << f;
  }
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
}

}  // namespace test_prepare
}  // namespace
}  // namespace strata::data
