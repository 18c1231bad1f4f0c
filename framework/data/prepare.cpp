#include "framework/data/prepare.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "framework/core/error.hpp"
#include "framework/data/corpus.hpp"
#include "framework/data/token_writer.hpp"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunkBytes = 1 << 20;

// Routes the n-th token of the concatenation to the train or the validation writer.
class SplitSink {
 public:
  SplitSink(TokenFileWriter& train, TokenFileWriter& val, std::uint64_t train_tokens)
      : train_(train), val_(val), train_tokens_(train_tokens) {}
  void put(const std::vector<std::uint32_t>& tokens) {
    std::span<const std::uint32_t> s(tokens);
    if (written_ < train_tokens_) {
      const std::uint64_t n = std::min<std::uint64_t>(s.size(), train_tokens_ - written_);
      train_.append(s.first(n));
      s = s.subspan(n);
      written_ += n;
    }
    val_.append(s);
    written_ += s.size();
  }

 private:
  TokenFileWriter& train_;
  TokenFileWriter& val_;
  std::uint64_t train_tokens_;
  std::uint64_t written_ = 0;
};

}  // namespace

PrepareResult prepare_corpus(const PrepareOptions& o) {
  if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0)) {
    user_fail("data", "validation fraction {} is not in [0, 1)", o.val_fraction);
  }
  if (o.output_prefix.empty()) user_fail("data", "no output prefix given");
  if (!o.tokenizer.empty()) return prepare_corpus_bpe(o);
  if (!o.vocab_path.empty() || !o.merges_path.empty())
    user_fail("data", "vocab.json and merges.txt belong to a tokenizer: add --tokenizer gpt2");
  std::uint32_t in_bytes = 1;
  std::uint64_t vocab = 256;
  if (o.tokenized_dtype.empty()) {
    if (o.vocab_size != 0 && o.vocab_size != 256) {
      user_fail("data",
                "text input is tokenised by bytes (vocabulary 256); vocabulary size {} needs "
                "already tokenised input (--tokenized u16|u32)",
                o.vocab_size);
    }
  } else {
    if (o.tokenized_dtype == "u16")
      in_bytes = 2;
    else if (o.tokenized_dtype == "u32")
      in_bytes = 4;
    else
      user_fail("data", "tokenised input dtype '{}' is not u16 or u32", o.tokenized_dtype);
    if (o.vocab_size == 0)
      user_fail("data", "tokenised input needs its vocabulary size (--vocab-size)");
    vocab = o.vocab_size;
    if (in_bytes == 2 && vocab > 65536) {
      user_fail("data", "vocabulary size {} does not fit u16 tokens (at most 65536)", vocab);
    }
  }

  PrepareResult r;
  r.files = list_corpus_files(o.inputs);
  r.vocab_size = vocab;
  r.bytes_per_token = vocab <= 65536 ? 2 : 4;
  r.train_path = o.output_prefix + ".train.tok";
  r.val_path = o.output_prefix + ".val.tok";

  std::vector<std::uint64_t> sizes;
  std::uint64_t total = 0;
  for (const auto& f : r.files) {
    std::error_code ec;
    const std::uint64_t bytes = fs::file_size(f, ec);
    if (ec) user_fail("data", "cannot read the size of '{}': {}", f, ec.message());
    if (bytes % in_bytes != 0) {
      user_fail("data", "'{}' has {} bytes, not a whole number of {} tokens ({} bytes each)", f,
                bytes, o.tokenized_dtype, in_bytes);
    }
    sizes.push_back(bytes);
    total += bytes / in_bytes;
  }
  if (total == 0) user_fail("data", "the input files hold no tokens");
  r.val_tokens = static_cast<std::uint64_t>(
      std::floor(static_cast<long double>(total) * static_cast<long double>(o.val_fraction)));
  r.train_tokens = total - r.val_tokens;

  const fs::path parent = fs::path(o.output_prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) user_fail("data", "cannot create directory '{}': {}", parent.string(), ec.message());
  }
  TokenFileWriter train(r.train_path, r.bytes_per_token, vocab);
  TokenFileWriter val(r.val_path, r.bytes_per_token, vocab);
  SplitSink sink(train, val, r.train_tokens);

  std::vector<char> chunk(kChunkBytes);
  std::vector<std::uint32_t> tokens;
  for (std::size_t k = 0; k < r.files.size(); ++k) {
    const std::string& f = r.files[k];
    std::ifstream in(f, std::ios::binary);
    if (!in) user_fail("data", "cannot open '{}'", f);
    std::uint64_t done = 0;
    while (done < sizes[k]) {
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(kChunkBytes, sizes[k] - done));
      in.read(chunk.data(), static_cast<std::streamsize>(want));
      if (static_cast<std::size_t>(in.gcount()) != want) {
        user_fail("data", "'{}' ended after {} of its {} bytes (changed while reading?)", f,
                  done + static_cast<std::uint64_t>(in.gcount()), sizes[k]);
      }
      tokens.resize(want / in_bytes);
      const auto* b = reinterpret_cast<const unsigned char*>(chunk.data());
      for (std::size_t i = 0; i < tokens.size(); ++i, b += in_bytes) {
        std::uint32_t v = b[0];
        if (in_bytes >= 2) v |= static_cast<std::uint32_t>(b[1]) << 8;
        if (in_bytes == 4)
          v |= (static_cast<std::uint32_t>(b[2]) << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
        if (v >= vocab) {
          user_fail("data", "'{}': token {} at index {} is out of range for vocabulary size {}", f,
                    v, done / in_bytes + i, vocab);
        }
        tokens[i] = v;
      }
      sink.put(tokens);
      done += want;
    }
    if (in.peek() != std::ifstream::traits_type::eof()) {
      user_fail("data", "'{}' grew while it was being read", f);
    }
  }
  train.commit();
  val.commit();
  return r;
}

}  // namespace strata::data
