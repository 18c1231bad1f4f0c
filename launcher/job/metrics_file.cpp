#include "launcher/job/metrics_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "framework/core/error.hpp"
#include "framework/core/output_path.hpp"

namespace strata::job {

void MetricsFile::check(const std::string& path) {
  if (path.empty()) return;
  // A device or FIFO is fine (the file is written in place, never renamed over).
  if (file_kind(path) == "a directory")
    user_fail("train_gpt", "--metrics '{}' is a directory; give a file path", path);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    user_fail("train_gpt", "--metrics '{}': directory '{}' does not exist", path, dir.string());
}

MetricsFile::~MetricsFile() {
  if (f_) std::fclose(f_);
}

void MetricsFile::open(const std::string& path, bool append) {
  path_ = path;
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_)
    user_fail("train_gpt", "cannot open the metrics file '{}': {}", path, std::strerror(errno));
}

void MetricsFile::write_line(const std::string& line) {
  errno = 0;
  const bool ok =
      std::fputs(line.c_str(), f_) >= 0 && std::fputc('\n', f_) != EOF && std::fflush(f_) == 0;
  if (!ok) {
    const int e = errno;
    std::clearerr(f_);
    user_fail("train_gpt", "cannot write the metrics file '{}': {}", path_,
              e ? std::strerror(e) : "write failed");
  }
}

}  // namespace strata::job
