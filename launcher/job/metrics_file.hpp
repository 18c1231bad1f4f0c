// A GPT job's metrics file (train_gpt's --metrics): one JSON line per step, appended by a resumed run. A write that
// fails (a full disk, /dev/full) is an error at once, not a silently shorter file.
#pragma once

#include <cstdio>
#include <string>

namespace strata::job {

class MetricsFile {
 public:
  // Start-up check, before any work: UserError when `path` is a directory or its directory does
  // not exist. Empty path: no metrics.
  static void check(const std::string& path);

  MetricsFile() = default;
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // Opens (appending for a resumed run, else truncating); UserError when it cannot.
  void open(const std::string& path, bool append);
  bool is_open() const { return f_ != nullptr; }
  // Writes the line and flushes; UserError naming the file and the reason when that fails.
  void write_line(const std::string& line);

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace strata::job
