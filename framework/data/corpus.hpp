// Finding the files of a text corpus: explicit files and directories (expanded by fixed rules)
// in one deterministic order, and the default corpus (Debian's `fortunes`).
#pragma once

#include <string>
#include <vector>

namespace strata::data {

// Where Debian's `fortunes` package keeps its English fortune files.
inline constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";

// Expands `inputs` (files or directories) into a byte-wise sorted list of files. A directory
// contributes, recursively, its regular files except: symbolic links, hidden entries (".x"),
// strfile indexes ("x.dat" next to "x"), "x.u8" next to "x", and subdirectories named "off"
// (the offensive fortunes). An explicit file is always taken. Throws UserError("data") when an
// input does not exist, a file is named twice, or nothing is found.
std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs);

}  // namespace strata::data
