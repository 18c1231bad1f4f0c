// prepare_corpus with GPT-2's byte-level BPE: the corpus is tokenised as one text into a
// temporary u32 token array, which the plain prepare_corpus then splits into train/validation.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "framework/core/error.hpp"
#include "framework/data/bpe.hpp"
#include "framework/data/corpus.hpp"
#include "framework/data/prepare.hpp"

namespace strata::data {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kBpeChunkBytes = 1 << 20;

// A file removed when this goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

void write_u32(std::ofstream& out, const std::vector<std::uint32_t>& ids, const std::string& path) {
  std::vector<unsigned char> b(ids.size() * 4);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (int k = 0; k < 4; ++k) b[4 * i + k] = static_cast<unsigned char>(ids[i] >> (8 * k));
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) user_fail("data", "writing '{}' failed: {}", path, std::strerror(errno));
}

}  // namespace

PrepareResult prepare_corpus_bpe(const PrepareOptions& o) {
  if (o.tokenizer != "gpt2")
    user_fail("data",
              "tokenizer '{}' is not known (use gpt2: byte-level BPE from vocab.json and "
              "merges.txt)",
              o.tokenizer);
  if (!o.tokenized_dtype.empty())
    user_fail("data",
              "--tokenizer tokenises text; --tokenized says the input is tokens already: "
              "use one of them");
  if (o.vocab_path.empty() || o.merges_path.empty())
    user_fail("data", "--tokenizer gpt2 needs --vocab VOCAB.json and --merges MERGES.txt");
  BpeTokenizer tok = BpeTokenizer::load_gpt2(o.vocab_path, o.merges_path);
  if (o.vocab_size != 0 && o.vocab_size != tok.vocab_size())
    user_fail("data", "--vocab-size {} but {} holds {} tokens", o.vocab_size, o.vocab_path,
              tok.vocab_size());

  const std::vector<std::string> files = list_corpus_files(o.inputs);
  const fs::path parent = fs::path(o.output_prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) user_fail("data", "cannot create directory '{}': {}", parent.string(), ec.message());
  }
  TempFile ids_file{o.output_prefix + ".bpe.tmp"};
  {
    std::ofstream out(ids_file.path, std::ios::binary | std::ios::trunc);
    if (!out) user_fail("data", "cannot create '{}': {}", ids_file.path, std::strerror(errno));
    BpeStreamEncoder enc(tok);
    std::vector<char> chunk(kBpeChunkBytes);
    std::vector<std::uint32_t> ids;
    for (const std::string& f : files) {
      std::ifstream in(f, std::ios::binary);
      if (!in) user_fail("data", "cannot open '{}'", f);
      enc.begin_input(f);
      while (in) {
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        ids.clear();
        enc.feed(std::string_view(chunk.data(), static_cast<std::size_t>(in.gcount())), ids);
        write_u32(out, ids, ids_file.path);
      }
      if (in.bad()) user_fail("data", "reading '{}' failed", f);
    }
    ids.clear();
    enc.finish(ids);
    write_u32(out, ids, ids_file.path);
    out.close();
    if (!out) user_fail("data", "writing '{}' failed: {}", ids_file.path, std::strerror(errno));
  }
  PrepareOptions split = o;
  split.inputs = {ids_file.path};
  split.tokenizer.clear();
  split.vocab_path.clear();
  split.merges_path.clear();
  split.tokenized_dtype = "u32";
  split.vocab_size = tok.vocab_size();
  PrepareResult r = prepare_corpus(split);
  r.files = files;
  return r;
}

}  // namespace strata::data
