#include "launcher/job/progress_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "framework/core/error.hpp"

namespace strata::job {

std::optional<ProgressFile> ProgressFile::from_env(int world_rank) {
  const char* dir = std::getenv("STRATA_PROGRESS_DIR");
  if (!dir || !*dir) return std::nullopt;
  return ProgressFile(dir, world_rank);
}

ProgressFile::ProgressFile(std::string dir, int world_rank)
    : path_(fmt::format("{}/rank_{:05d}.progress", dir, world_rank)) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    user_fail("train_gpt", "STRATA_PROGRESS_DIR '{}' cannot be created: {}", dir, ec.message());
}

void ProgressFile::layout(int world, int model_parallel, std::int64_t micro_batch,
                          std::int64_t accumulation, std::int64_t global_batch, bool checkpoints) {
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  write_to(dir + "/layout",
           fmt::format("world {}\nmodel_parallel {}\nmicro_batch {}\naccumulation {}\nglobal_batch "
                       "{}\ncheckpoints {}",
                       world, model_parallel, micro_batch, accumulation, global_batch,
                       checkpoints ? 1 : 0));
}

void ProgressFile::write(const std::string& text) { write_to(path_, text); }

void ProgressFile::write_to(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr;
  if (f) {
    ok = std::fprintf(f, "%s\n", text.c_str()) > 0;
    ok = std::fclose(f) == 0 && ok;
  }
  ok = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok && !warned_) {
    warned_ = true;
    std::fprintf(stderr, "train_gpt: warning: cannot write progress file %s: %s\n", path.c_str(),
                 std::strerror(errno));
  }
}

}  // namespace strata::job
