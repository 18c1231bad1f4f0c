// Byte-level BPE as GPT-2 does it, from GPT-2's files: vocab.json (token → id, tokens spelled in
// GPT-2's byte-to-unicode alphabet) and merges.txt (one merge "a b" per line, by rank). Text is
// cut by GPT-2's pre-tokenization regex (pretokenize.hpp); each piece's bytes are merged by rank
// (lowest first, leftmost first among equals) into vocabulary ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "framework/data/pretokenize.hpp"

namespace strata::data {

// GPT-2's map from a byte to the Unicode code point that spells it in vocab.json/merges.txt:
// printable Latin-1 bytes stand for themselves, the others for U+0100 upwards ("Ġ" is a space).
char32_t gpt2_byte_to_unicode(unsigned char b);

class BpeTokenizer {
 public:
  // Reads and checks both files: valid JSON object of string → non-negative int, unique ids, every
  // one of the 256 bytes present, every merge's parts and result in the vocabulary. Errors are
  // one-line UserError("data") naming the file (and line for merges.txt).
  static BpeTokenizer load_gpt2(const std::string& vocab_json, const std::string& merges_txt);

  // Largest id + 1: the vocabulary size of the token files.
  std::uint64_t vocab_size() const { return vocab_size_; }
  std::size_t merges() const { return ranks_.size(); }

  // The ids of one pre-tokenized piece (appended to out).
  void encode_piece(std::string_view piece, std::vector<std::uint32_t>& out);
  // The ids of a whole text.
  std::vector<std::uint32_t> encode(std::string_view text);
  // The bytes the ids stand for.
  std::string decode(const std::vector<std::uint32_t>& ids) const;

 private:
  struct Merge {
    std::uint32_t rank, id;
  };
  std::uint32_t byte_id_[256] = {};
  std::unordered_map<std::uint64_t, Merge> ranks_;  // (left id << 32 | right id) → merge
  std::vector<std::string> bytes_of_;               // id → bytes ("" for unused ids)
  std::uint64_t vocab_size_ = 0;
  std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;
};

// Encodes a stream of text (fed in any chunks) with a BpeTokenizer: the ids of the whole text.
class BpeStreamEncoder {
 public:
  explicit BpeStreamEncoder(BpeTokenizer& tok) : tok_(tok) {}
  // The bytes fed from now on come from `name` (for errors).
  void begin_input(std::string name) { pre_.begin_input(std::move(name)); }
  // Appends to `out` the ids of the text so far that later bytes cannot change.
  void feed(std::string_view bytes, std::vector<std::uint32_t>& out);
  void finish(std::vector<std::uint32_t>& out);

 private:
  BpeTokenizer& tok_;
  Gpt2Pretokenizer pre_;
};

}  // namespace strata::data
