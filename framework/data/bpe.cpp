#include "framework/data/bpe.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <fstream>
#include <queue>
#include <sstream>

#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"

namespace strata::data {

namespace {

constexpr std::size_t kCacheLimit = 1 << 20;  // pieces remembered before the cache is cleared

// byte → code point, and back (GPT-2's bytes_to_unicode).
struct ByteAlphabet {
  std::array<char32_t, 256> to_cp{};
  std::unordered_map<char32_t, unsigned char> to_byte;
  ByteAlphabet() {
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? static_cast<char32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<unsigned char>(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// The bytes a token spelled in GPT-2's alphabet stands for; false if a character is not in it.
bool spelled_bytes(std::string_view utf8, std::string& out) {
  out.clear();
  const auto* b = reinterpret_cast<const unsigned char*>(utf8.data());
  for (std::size_t i = 0; i < utf8.size();) {
    char32_t cp;
    std::size_t len;
    if (b[i] < 0x80) {
      cp = b[i];
      len = 1;
    } else if ((b[i] & 0xE0) == 0xC0 && i + 1 < utf8.size()) {
      cp = ((b[i] & 0x1Fu) << 6) | (b[i + 1] & 0x3Fu);
      len = 2;
    } else {
      return false;  // 3- and 4-byte characters are beyond U+0143
    }
    const auto it = alphabet().to_byte.find(cp);
    if (it == alphabet().to_byte.end()) return false;
    out.push_back(static_cast<char>(it->second));
    i += len;
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) user_fail("data", "cannot open '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shown(std::string_view s) {
  return fmt::format("'{}'", s);
}

std::uint64_t pair_key(std::uint32_t left, std::uint32_t right) {
  return (std::uint64_t{left} << 32) | right;
}

}  // namespace

char32_t gpt2_byte_to_unicode(unsigned char b) {
  return alphabet().to_cp[b];
}

BpeTokenizer BpeTokenizer::load_gpt2(const std::string& vocab_path,
                                     const std::string& merges_path) {
  BpeTokenizer t;
  nlohmann::json vocab;
  try {
    const std::string text = read_file(vocab_path);
    check_json_limits(text, vocab_path, "data");  // depth, number sizes
    vocab = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    user_fail("data", "{}: not valid JSON: {}", vocab_path, e.what());
  }
  if (!vocab.is_object() || vocab.empty())
    user_fail("data", "{}: expected a JSON object of token → id (GPT-2's vocab.json)", vocab_path);
  std::unordered_map<std::string, std::uint32_t> id_of;  // by bytes
  t.vocab_size_ = vocab.size();
  t.bytes_of_.resize(vocab.size());
  std::vector<bool> seen(vocab.size());
  std::string bytes;
  for (const auto& [token, v] : vocab.items()) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
        v.get<std::int64_t>() >= static_cast<std::int64_t>(vocab.size()))
      user_fail("data", "{}: the id of {} is {}: the {} tokens must have the ids 0..{}", vocab_path,
                shown(token), v.dump(), vocab.size(), vocab.size() - 1);
    const auto id = v.get<std::uint32_t>();
    if (seen[id]) user_fail("data", "{}: id {} is given to two tokens", vocab_path, id);
    seen[id] = true;
    // Tokens outside GPT-2's byte alphabet (added special tokens) are never produced by BPE.
    if (!spelled_bytes(token, bytes) || bytes.empty()) continue;
    t.bytes_of_[id] = bytes;
    if (!id_of.emplace(bytes, id).second)
      user_fail("data", "{}: tokens {} and another spell the same bytes", vocab_path, shown(token));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end())
      user_fail("data", "{}: no token for byte 0x{:02X}: not a byte-level BPE vocabulary",
                vocab_path, b);
    t.byte_id_[b] = it->second;
  }

  std::istringstream merges(read_file(merges_path));
  std::string line, part_bytes[2];
  std::uint32_t rank = 0;
  for (std::size_t no = 1; std::getline(merges, line); ++no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (no == 1 && line.rfind("#version", 0) == 0)) continue;
    const auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos)
      user_fail("data", "{}:{}: expected two tokens separated by one space, got {}", merges_path,
                no, shown(line));
    std::uint32_t ids[2];
    for (int k = 0; k < 2; ++k) {
      const std::string_view part =
          k == 0 ? std::string_view(line).substr(0, sp) : std::string_view(line).substr(sp + 1);
      if (!spelled_bytes(part, part_bytes[k]))
        user_fail("data", "{}:{}: {} is not spelled in GPT-2's byte alphabet", merges_path, no,
                  shown(part));
      const auto it = id_of.find(part_bytes[k]);
      if (it == id_of.end())
        user_fail("data", "{}:{}: {} is not in {}", merges_path, no, shown(part), vocab_path);
      ids[k] = it->second;
    }
    const auto merged = id_of.find(part_bytes[0] + part_bytes[1]);
    if (merged == id_of.end())
      user_fail("data", "{}:{}: the merge of {} is not in {}", merges_path, no, shown(line),
                vocab_path);
    t.ranks_.emplace(pair_key(ids[0], ids[1]), Merge{rank++, merged->second});  // first one wins
  }
  return t;
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<std::uint32_t>& out) {
  if (piece.empty()) return;
  const std::string key(piece);
  if (const auto it = cache_.find(key); it != cache_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  // Symbols in a linked list; candidate merges in a heap by (rank, position). A popped candidate
  // whose symbols have changed since it was pushed is stale and skipped.
  struct Sym {
    std::uint32_t id;
    int prev, next;
  };
  std::vector<Sym> s(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i)
    s[i] = {byte_id_[static_cast<unsigned char>(piece[i])], static_cast<int>(i) - 1,
            i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1};
  struct Cand {
    std::uint32_t rank;
    int pos;
    std::uint32_t left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto push = [&](int i) {
    if (i < 0 || s[i].next < 0) return;
    const auto it = ranks_.find(pair_key(s[i].id, s[s[i].next].id));
    if (it != ranks_.end())
      heap.push({it->second.rank, i, s[i].id, s[s[i].next].id, it->second.id});
  };
  for (int i = 0; i + 1 < static_cast<int>(s.size()); ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& a = s[c.pos];
    if (a.id != c.left || a.next < 0 || s[a.next].id != c.right) continue;  // stale
    const int gone = a.next;
    a.id = c.merged;
    a.next = s[gone].next;
    if (a.next >= 0) s[a.next].prev = c.pos;
    s[gone].id = UINT32_MAX;  // dead: never matches a candidate again
    push(a.prev);
    push(c.pos);
  }
  std::vector<std::uint32_t> ids;
  for (int i = 0; i >= 0; i = s[i].next) ids.push_back(s[i].id);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cache_.size() >= kCacheLimit) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

std::vector<std::uint32_t> BpeTokenizer::encode(std::string_view text) {
  std::vector<std::uint32_t> out;
  BpeStreamEncoder enc(*this);
  enc.feed(text, out);
  enc.finish(out);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::string out;
  for (const auto id : ids) {
    STRATA_CHECK(id < bytes_of_.size(), "data", "id {} is outside the vocabulary", id);
    out += bytes_of_[id];
  }
  return out;
}

void BpeStreamEncoder::feed(std::string_view bytes, std::vector<std::uint32_t>& out) {
  pre_.feed(bytes, [&](std::string_view piece) { tok_.encode_piece(piece, out); });
}

void BpeStreamEncoder::finish(std::vector<std::uint32_t>& out) {
  pre_.finish([&](std::string_view piece) { tok_.encode_piece(piece, out); });
}

}  // namespace strata::data
