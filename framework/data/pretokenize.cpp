#include "framework/data/pretokenize.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "framework/core/error.hpp"

namespace strata::data {

namespace {

// GPT-2's pattern (openai/gpt-2 encoder.py; also Hugging Face's ByteLevel pre-tokenizer).
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A piece starting at p is final only when the 3 bytes after p are known: the contractions look
// that far ("'re" must not become "'" + "re" because the "e" had not arrived yet).
constexpr std::size_t kLookahead = 4;

}  // namespace

struct Gpt2Pretokenizer::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  Regex() {
    int err = 0;
    PCRE2_SIZE at = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("data", "PCRE2 rejected GPT-2's pattern at {}: {}", at, reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // the interpreter is the fallback
    match = pcre2_match_data_create_from_pattern(code, nullptr);
    STRATA_CHECK(match, "data", "out of memory for PCRE2 match data");
  }
  ~Regex() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

Utf8Prefix utf8_prefix(std::string_view s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = b[i];
    std::size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // at most U+10FFFF
    } else {
      return {i, false};
    }
    for (std::size_t k = 1; k < len; ++k) {
      if (i + k >= n) return {i, true};  // the sequence continues beyond s
      const unsigned t = b[i + k];
      if (k == 1 ? (t < lo || t > hi) : (t < 0x80 || t > 0xBF)) return {i, false};
    }
    i += len;
  }
  return {n, true};
}

Gpt2Pretokenizer::Gpt2Pretokenizer() : re_(std::make_unique<Regex>()) {}
Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;

void Gpt2Pretokenizer::begin_input(std::string name) {
  inputs_.emplace_back(consumed_ + buffer_.size(), std::move(name));
}

void Gpt2Pretokenizer::feed(std::string_view bytes, const Sink& sink) {
  buffer_.append(bytes);
  run(false, sink);
}

void Gpt2Pretokenizer::finish(const Sink& sink) {
  run(true, sink);
  buffer_.clear();
  checked_ = 0;
}

void Gpt2Pretokenizer::split(std::string_view text, const Sink& sink) {
  Gpt2Pretokenizer p;
  p.feed(text, sink);
  p.finish(sink);
}

void Gpt2Pretokenizer::bad_utf8(std::uint64_t offset, bool truncated) const {
  std::string where = "text";
  std::uint64_t begin = 0;
  for (const auto& [at, name] : inputs_)
    if (at <= offset) {
      begin = at;
      where = name;
    }
  user_fail("data", "{}: {} UTF-8 at byte {}: text must be UTF-8 (convert it, e.g. with iconv)",
            where, truncated ? "truncated" : "invalid", offset - begin);
}

void Gpt2Pretokenizer::run(bool last, const Sink& sink) {
  const Utf8Prefix v = utf8_prefix(std::string_view(buffer_).substr(checked_));
  if (!v.rest_incomplete || (last && checked_ + v.valid < buffer_.size()))
    bad_utf8(consumed_ + checked_ + v.valid, v.rest_incomplete);
  checked_ += v.valid;
  const std::size_t limit = checked_;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(buffer_.data());
  std::size_t pos = 0;
  while (pos < limit) {
    const int rc =
        pcre2_match(re_->code, subject, limit, pos, PCRE2_NO_UTF_CHECK, re_->match, nullptr);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(re_->match);
    // Every character is a letter, a number, white space or something else: the pattern's
    // alternatives tile the text.
    STRATA_CHECK(rc > 0 && ov[0] == pos && ov[1] > pos, "data",
                 "GPT-2's pattern left a gap at byte {} of the text (PCRE2 returned {})",
                 consumed_ + pos, rc);
    if (!last && (ov[1] >= limit || pos + kLookahead > limit)) break;  // may change with more text
    sink(std::string_view(buffer_).substr(pos, ov[1] - pos));
    pos = ov[1];
  }
  buffer_.erase(0, pos);
  checked_ -= pos;
  consumed_ += pos;
}

}  // namespace strata::data
