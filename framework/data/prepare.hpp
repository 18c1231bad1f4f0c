// prepare_corpus: turns text files (byte-level tokens, vocabulary 256, or GPT-2's byte-level BPE)
// or raw token arrays into a train and a validation token file, deterministically and without
// loading the corpus whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or directories (see list_corpus_files)
  std::string output_prefix;        // writes <prefix>.train.tok and <prefix>.val.tok
  double val_fraction = 0.1;        // in [0, 1): the last floor(N * val_fraction) tokens
  // "" = inputs are text, one token per byte (vocabulary 256); "u16" / "u32" = inputs are
  // already tokenised little-endian arrays with tokens < vocab_size.
  std::string tokenized_dtype;
  std::uint64_t vocab_size = 0;  // required with tokenized_dtype; 0 or 256 for text
  // "gpt2": text is tokenised with GPT-2's byte-level BPE from these files (bpe.hpp); the
  // vocabulary size is vocab.json's.
  std::string tokenizer;
  std::string vocab_path, merges_path;
};

struct PrepareResult {
  std::vector<std::string> files;  // inputs in the order they were concatenated
  std::string train_path, val_path;
  std::uint64_t train_tokens = 0, val_tokens = 0;
  std::uint32_t bytes_per_token = 0;  // of the outputs: 2 when vocab <= 65536, else 4
  std::uint64_t vocab_size = 0;
};

// Concatenates the input files in sorted order (nothing inserted between files), puts the first
// N - floor(N * val_fraction) tokens in the train file and the rest in the validation file.
// Both files are written under temporary names and renamed when complete. Throws UserError("data").
// With a BPE tokenizer the concatenated text is tokenised as one text (into a temporary u32 file
// beside the outputs, <prefix>.bpe.tmp, removed afterwards) and then split the same way.
PrepareResult prepare_corpus(const PrepareOptions& options);

// prepare_corpus for options.tokenizer == "gpt2" (prepare_bpe.cpp).
PrepareResult prepare_corpus_bpe(const PrepareOptions& options);

}  // namespace strata::data
