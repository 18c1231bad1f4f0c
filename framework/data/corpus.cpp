#include "framework/data/corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "framework/core/error.hpp"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "x.dat" (a strfile index) or "x.u8" (a UTF-8 alias) with a file "x" beside it.
bool is_companion_file(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string suffix : {".dat", ".u8"}) {
    if (has_suffix(name, suffix) &&
        fs::exists(dir / name.substr(0, name.size() - suffix.size()), ec)) {
      return true;
    }
  }
  return false;
}

void expand_directory(const fs::path& dir, std::vector<std::string>& out) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(*it);
  }
  if (ec) user_fail("data", "cannot list directory '{}': {}", dir.string(), ec.message());
  for (const auto& e : entries) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (e.is_symlink(ec)) continue;
    if (e.is_directory(ec)) {
      if (name != "off") expand_directory(e.path(), out);
      continue;
    }
    if (!e.is_regular_file(ec)) continue;
    if (is_companion_file(dir, name)) continue;
    out.push_back(e.path().string());
  }
}

}  // namespace

std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs) {
  if (inputs.empty()) user_fail("data", "no input files or directories given");
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(in, ec);
    if (ec || !fs::exists(st)) {
      user_fail(
          "data", "input '{}' does not exist{}", in,
          in == kDefaultCorpusDir ? " (install Debian's `fortunes` package, or pass --input)" : "");
    }
    if (fs::is_directory(st)) {
      const std::size_t before = files.size();
      expand_directory(in, files);
      if (files.size() == before) user_fail("data", "directory '{}' holds no corpus files", in);
    } else if (fs::is_regular_file(st)) {
      files.push_back(in);
    } else {
      user_fail("data", "input '{}' is neither a regular file nor a directory", in);
    }
  }
  std::sort(files.begin(), files.end());
  const auto dup = std::adjacent_find(files.begin(), files.end());
  if (dup != files.end()) user_fail("data", "file '{}' is given more than once", *dup);
  return files;
}

}  // namespace strata::data
