// strata data: `prepare` turns a text corpus (bytes or GPT-2 BPE, or tokenised arrays) into
// train/validation token files; `inspect` prints a token file's header and first tokens.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "framework/data/corpus.hpp"
#include "framework/data/inspect.hpp"
#include "framework/data/prepare.hpp"
#include "framework/data/token_file.hpp"
#include "launcher/commands.hpp"

namespace strata::launcher {

namespace {

void add_prepare(CLI::App& data) {
  auto opts = std::make_shared<data::PrepareOptions>();
  auto* cmd = data.add_subcommand(
      "prepare",
      "Write <PREFIX>.train.tok and <PREFIX>.val.tok from text files (one token per byte, "
      "vocabulary 256; or GPT-2's byte-level BPE with --tokenizer gpt2) or already tokenised "
      "u16/u32 arrays");
  cmd->add_option("--input,-i", opts->inputs,
                  fmt::format("Files or directories, concatenated in sorted order (default: {})",
                              data::kDefaultCorpusDir));
  cmd->add_option("--output,-o", opts->output_prefix, "Output prefix")->required();
  cmd->add_option("--val-fraction", opts->val_fraction,
                  "Fraction of tokens (the last ones) for validation, in [0, 1)")
      ->capture_default_str();
  auto* tokenized = cmd->add_option("--tokenized", opts->tokenized_dtype,
                                    "Inputs are little-endian token arrays of this dtype")
                        ->check(CLI::IsMember({"u16", "u32"}));
  cmd->add_option("--vocab-size", opts->vocab_size, "Vocabulary size of tokenised inputs")
      ->needs(tokenized);
  tokenized->needs("--vocab-size");
  auto* tokenizer = cmd->add_option("--tokenizer", opts->tokenizer,
                                    "Tokenise text with this tokenizer: gpt2 (byte-level BPE from "
                                    "GPT-2's vocab.json and merges.txt)")
                        ->check(CLI::IsMember({"gpt2"}))
                        ->excludes(tokenized);
  auto* vocab = cmd->add_option("--vocab", opts->vocab_path, "vocab.json of --tokenizer gpt2")
                    ->check(CLI::ExistingFile)
                    ->needs(tokenizer);
  auto* merges = cmd->add_option("--merges", opts->merges_path, "merges.txt of --tokenizer gpt2")
                     ->check(CLI::ExistingFile)
                     ->needs(tokenizer);
  tokenizer->needs(vocab)->needs(merges);
  cmd->callback([opts] {
    if (opts->inputs.empty()) opts->inputs = {data::kDefaultCorpusDir};
    const data::PrepareResult r = data::prepare_corpus(*opts);
    fmt::print("read {} file(s), {} tokens (vocabulary {}, {} bytes per token)\n", r.files.size(),
               r.train_tokens + r.val_tokens, r.vocab_size, r.bytes_per_token);
    fmt::print("train  {}  {} tokens\n", r.train_path, r.train_tokens);
    fmt::print("val    {}  {} tokens\n", r.val_path, r.val_tokens);
  });
}

void add_inspect(CLI::App& data) {
  struct Args {
    std::string file;
    std::uint64_t show = 64;
    bool check = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = data.add_subcommand("inspect", "Print a token file's header and first tokens");
  cmd->add_option("file", args->file, "Token file")->required();
  cmd->add_option("--tokens,-n", args->show, "How many leading tokens to print")
      ->capture_default_str();
  cmd->add_flag("--check", args->check, "Also check every token against the vocabulary");
  cmd->callback([args] {
    const data::TokenFile f(args->file, args->check);
    fmt::print("{}", data::describe_token_file(f, args->show));
    if (args->check) fmt::print("check       all {} tokens < {}\n", f.size(), f.vocab_size());
  });
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Prepare and inspect token files");
  data->require_subcommand(1);
  add_prepare(*data);
  add_inspect(*data);
}

}  // namespace strata::launcher
