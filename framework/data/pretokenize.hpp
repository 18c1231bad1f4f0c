// GPT-2's pre-tokenization: text is cut into pieces by the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Unicode letters, numbers and white space; PCRE2 with UTF + UCP), fed as a stream of bytes in
// any chunking: the pieces are those of the whole text at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::data {

class Gpt2Pretokenizer {
 public:
  using Sink = std::function<void(std::string_view piece)>;

  Gpt2Pretokenizer();
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // The bytes fed from now on come from `name` (named in errors, with offsets within it).
  void begin_input(std::string name);
  // Appends bytes of the text and passes every piece that later bytes cannot change to `sink`.
  // Invalid UTF-8 is a UserError("data") naming the input and the byte's offset in it.
  void feed(std::string_view bytes, const Sink& sink);
  // The end of the text: passes the remaining pieces (a truncated UTF-8 sequence is an error).
  void finish(const Sink& sink);

  // Convenience: the pieces of a whole text.
  static void split(std::string_view text, const Sink& sink);

 private:
  void run(bool last, const Sink& sink);
  [[noreturn]] void bad_utf8(std::uint64_t offset, bool truncated) const;

  struct Regex;
  std::unique_ptr<Regex> re_;
  std::string buffer_;          // bytes not yet passed on
  std::size_t checked_ = 0;     // buffer_[0, checked_) is valid UTF-8
  std::uint64_t consumed_ = 0;  // stream offset of buffer_[0]
  std::vector<std::pair<std::uint64_t, std::string>> inputs_;  // stream offset where each begins
};

// The length of the longest prefix of `s` made of complete, valid UTF-8 sequences, and whether
// the rest is only an incomplete (not invalid) sequence.
struct Utf8Prefix {
  std::size_t valid = 0;
  bool rest_incomplete = true;
};
Utf8Prefix utf8_prefix(std::string_view s);

}  // namespace strata::data
