// GPT-2 byte-level BPE against tests/fixtures/bpe_tiny (made by tools/pytorch/make_bpe_fixture.py
// with Hugging Face's tokenizers and transformers' GPT2Tokenizer): the same ids for a text with
// ASCII, accents, CJK, emoji, numbers, contractions and odd white space — whole, streamed in any
// chunking, and through prepare_corpus across files cut mid-character; one-line errors for bad
// vocabularies, merges and text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "framework/core/error.hpp"
#include "framework/data/bpe.hpp"
#include "framework/data/prepare.hpp"
#include "framework/data/token_file.hpp"
#include "temp_dir.hpp"

namespace strata::data {
namespace {

using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

const std::string kDir = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/bpe_tiny";

BpeTokenizer fixture_tokenizer() {
  return BpeTokenizer::load_gpt2(kDir + "/vocab.json", kDir + "/merges.txt");
}

std::vector<std::uint32_t> reference_ids() {
  std::ifstream in(kDir + "/ids.txt");
  std::vector<std::uint32_t> ids;
  for (std::uint32_t v; in >> v;) ids.push_back(v);
  return ids;
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  Gpt2Pretokenizer::split(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string w = e.what();
    return w.find('\n') == std::string::npos ? w : "<not one line> " + w;
  }
  return "<no UserError>";
}

TEST(Bpe, FixtureTextGivesTheReferenceIds) {
  BpeTokenizer tok = fixture_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 512u);
  const std::string text = read_bytes(kDir + "/text.txt");
  const auto ref = reference_ids();
  ASSERT_GT(ref.size(), 400u);
  const auto ids = tok.encode(text);
  EXPECT_EQ(ids, ref);
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(Bpe, StreamedInAnyChunksGivesTheSameIds) {
  BpeTokenizer tok = fixture_tokenizer();
  const std::string text = read_bytes(kDir + "/text.txt");
  const auto ref = reference_ids();
  for (std::size_t chunk : {1, 2, 3, 5, 7, 64}) {
    BpeStreamEncoder enc(tok);
    std::vector<std::uint32_t> ids;
    for (std::size_t i = 0; i < text.size(); i += chunk)
      enc.feed(std::string_view(text).substr(i, chunk), ids);
    enc.finish(ids);
    EXPECT_EQ(ids, ref) << "chunks of " << chunk << " bytes";
  }
}

TEST(Bpe, Gpt2PreTokenization) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world!"), (V{"Hello", " world", "!"}));
  EXPECT_EQ(pieces("it's we're I'M"), (V{"it", "'s", " we", "'re", " I", "'", "M"}));
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));  // the last space goes with the word
  EXPECT_EQ(pieces("x  \n\ny"), (V{"x", "  \n", "\n", "y"}));
  EXPECT_EQ(pieces("end  "), (V{"end", "  "}));
  EXPECT_EQ(pieces("abc123 45.6"), (V{"abc", "123", " 45", ".", "6"}));
  EXPECT_EQ(pieces("Café 東京 🙂!"), (V{"Café", " 東京", " 🙂!"}));
  EXPECT_EQ(gpt2_byte_to_unicode(' '), U'\u0120');  // 'Ġ'
  EXPECT_EQ(gpt2_byte_to_unicode('a'), U'a');
}

TEST(Bpe, PrepareTokenisesFilesAsOneTextAndSplits) {
  TempDir dir;
  const std::string text = read_bytes(kDir + "/text.txt");
  // Three files cut inside words and inside multi-byte characters: the concatenation is the text.
  const std::size_t cjk = text.find("東京");
  ASSERT_NE(cjk, std::string::npos);
  const std::size_t cuts[] = {0, 37, cjk + 1, text.size()};
  std::filesystem::create_directory(dir / "in");
  for (int i = 0; i < 3; ++i)
    write_bytes(dir / ("in/part" + std::to_string(i)), text.substr(cuts[i], cuts[i + 1] - cuts[i]));
  PrepareOptions o;
  o.inputs = {dir / "in"};
  o.output_prefix = dir / "out/bpe";
  o.val_fraction = 0.25;
  o.tokenizer = "gpt2";
  o.vocab_path = kDir + "/vocab.json";
  o.merges_path = kDir + "/merges.txt";
  const PrepareResult r = prepare_corpus(o);
  const auto ref = reference_ids();
  EXPECT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.vocab_size, 512u);
  EXPECT_EQ(r.bytes_per_token, 2u);
  EXPECT_EQ(r.val_tokens, ref.size() / 4);
  EXPECT_EQ(r.train_tokens + r.val_tokens, ref.size());
  std::vector<std::uint32_t> got;
  for (const std::string& p : {r.train_path, r.val_path}) {
    TokenFile f(p, true);
    EXPECT_EQ(f.vocab_size(), 512u);
    for (std::uint64_t i = 0; i < f.size(); ++i) got.push_back(f.at(i));
  }
  EXPECT_EQ(got, ref);
  EXPECT_FALSE(std::filesystem::exists(o.output_prefix + ".bpe.tmp"));
}

TEST(Bpe, BadTextIsAOneLineErrorNamingFileAndByte) {
  TempDir dir;
  write_bytes(dir / "a.txt", "fine text\n");
  write_bytes(dir / "b.txt", "caf\xC3\xA9 then bad \xFF byte");
  PrepareOptions o;
  o.inputs = {dir / "a.txt", dir / "b.txt"};
  o.output_prefix = dir / "out";
  o.tokenizer = "gpt2";
  o.vocab_path = kDir + "/vocab.json";
  o.merges_path = kDir + "/merges.txt";
  EXPECT_EQ(user_error_of([&] { prepare_corpus(o); }),
            "[data] " + dir / "b.txt" +
                ": invalid UTF-8 at byte 15: text must be UTF-8 (convert "
                "it, e.g. with iconv)");
  write_bytes(dir / "b.txt", "ends inside \xE6\x9D");
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("b.txt: truncated UTF-8 at byte 12"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.train.tok"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out.bpe.tmp"));
  o.tokenized_dtype = "u16";
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("use one of them"), std::string::npos);
  o.tokenized_dtype.clear();
  o.merges_path.clear();
  EXPECT_NE(user_error_of([&] { prepare_corpus(o); }).find("needs --vocab"), std::string::npos);
}

TEST(Bpe, BadVocabularyAndMergesAreOneLineErrors) {
  TempDir dir;
  const std::string vocab = kDir + "/vocab.json", merges = kDir + "/merges.txt";
  auto err = [&](const std::string& v, const std::string& m) {
    return user_error_of([&] { BpeTokenizer::load_gpt2(v, m); });
  };
  write_bytes(dir / "v1.json", R"({"a": 0, "b": 0})");
  EXPECT_NE(err(dir / "v1.json", merges).find("id 0 is given to two tokens"), std::string::npos);
  write_bytes(dir / "v2.json", R"({"a": 0, "b": 5})");
  EXPECT_NE(err(dir / "v2.json", merges).find("must have the ids 0..1"), std::string::npos);
  write_bytes(dir / "v3.json", R"({"a": 0, "b": 1})");
  EXPECT_NE(err(dir / "v3.json", merges).find("no token for byte 0x00"), std::string::npos);
  write_bytes(dir / "v4.json", "{\"a\": ");
  EXPECT_NE(err(dir / "v4.json", merges).find("not valid JSON"), std::string::npos);
  write_bytes(dir / "m1.txt", "#version: 0.2\nh e\nthree parts here\n");
  EXPECT_NE(err(vocab, dir / "m1.txt").find("m1.txt:3: expected two tokens separated by one space"),
            std::string::npos);
  write_bytes(dir / "m2.txt", "h e\nzq xw\n");
  EXPECT_NE(err(vocab, dir / "m2.txt").find("m2.txt:2: 'zq' is not in"), std::string::npos);
  EXPECT_NE(err(dir / "nope.json", merges).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace strata::data
