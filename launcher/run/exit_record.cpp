#include "launcher/run/exit_record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/core/exit_status.hpp"
#include "launcher/run/process.hpp"

namespace strata::launcher::run {

namespace fs = std::filesystem;

bool ExitRecord::final() const {
  return !signaled && !collateral && !restart_can_help(code);
}

std::string ExitRecord::describe() const {
  return signaled ? fmt::format("rank {} killed by {}", rank, describe_signal(code))
                  : fmt::format("rank {} exited with status {}", rank, code);
}

std::string exit_record_path(const std::string& dir, int rank) {
  return (fs::path(dir) / fmt::format("rank_{:05d}.exit", rank)).string();
}

void write_exit_record(const std::string& dir, const ExitRecord& r) {
  const std::string path = exit_record_path(dir, r.rank);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << fmt::format("rank {}\n{} {}\ncollateral {}\ntime_ns {}\n", r.rank,
                       r.signaled ? "signal" : "exit", r.code, r.collateral ? 1 : 0, r.time_ns);
    for (const auto& line : r.message) out << "message " << line << "\n";
    if (!out) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::vector<ExitRecord> read_exit_records(const std::string& dir) {
  std::vector<ExitRecord> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".exit") continue;
    std::ifstream in(e.path());
    ExitRecord r;
    std::string key;
    int got = 0;
    while (in >> key) {
      if (key == "rank" && in >> r.rank)
        got |= 1;
      else if ((key == "signal" || key == "exit") && in >> r.code) {
        r.signaled = key == "signal";
        got |= 2;
      } else if (key == "collateral") {
        int c = 0;
        in >> c;
        r.collateral = c != 0;
      } else if (key == "time_ns") {
        in >> r.time_ns;
      } else if (key == "message") {
        std::string line;
        std::getline(in, line);
        r.message.push_back(line.empty() ? line : line.substr(1));  // after the one space
      }
    }
    if (got == 3) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const ExitRecord& a, const ExitRecord& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.rank < b.rank;
  });
  return out;
}

}  // namespace strata::launcher::run
