#include "framework/core/output_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "framework/core/error.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

// Whether a new file can be created in directory `dir` (by creating and removing one); the
// errno text otherwise.
std::string probe_create(const std::string& dir) {
  static std::atomic<unsigned> counter{0};
  char host[64] = "host";
  ::gethostname(host, sizeof host - 1);
  for (int attempt = 0;; ++attempt) {
    // Unique across the ranks of a job on a shared file system (host, pid).
    const std::string probe =
        (fs::path(dir) / fmt::format(".strata-probe-{}-{}-{}", host, ::getpid(), counter++))
            .string();
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && attempt < 100) continue;
    if (fd < 0) return std::strerror(errno);
    ::close(fd);
    ::unlink(probe.c_str());
    return "";
  }
}

std::string parent_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

}  // namespace

std::string file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

void check_output_file(const std::string& path, const std::string& tag, std::string_view what) {
  if (path.empty()) user_fail(tag, "{}: empty path", what);
  const std::string kind = file_kind(path);
  if (kind == "a directory")
    user_fail(tag, "{} '{}' is a directory; give a file path, e.g. '{}'", what, path,
              (fs::path(path) / "out.h5").string());
  if (!kind.empty())
    user_fail(tag,
              "{} '{}' is {}, not a regular file: writing there would replace it; give a "
              "file path",
              what, path, kind);
  const std::string dir = parent_of(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    user_fail(tag, "{} '{}': directory '{}' does not exist", what, path, dir);
  if (const std::string why = probe_create(dir); !why.empty())
    user_fail(tag, "{} '{}': cannot create files in '{}': {}", what, path, dir, why);
}

void check_output_dir(const std::string& path, const std::string& tag, std::string_view what) {
  if (path.empty()) user_fail(tag, "{}: empty path", what);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (!fs::is_directory(path, ec))
      user_fail(tag, "{} '{}' is {}, not a directory; give a directory", what, path,
                file_kind(path).empty() ? "a file" : file_kind(path));
    if (const std::string why = probe_create(path); !why.empty())
      user_fail(tag, "{} '{}': cannot create files there: {}", what, path, why);
    return;
  }
  // Missing: the nearest existing ancestor must be a directory that takes new entries.
  fs::path up = fs::path(path).lexically_normal();
  for (;;) {
    up = up.has_parent_path() && up.parent_path() != up ? up.parent_path() : fs::path(".");
    if (fs::exists(up, ec)) break;
    if (up == ".") break;
  }
  const std::string anc = up.string();
  if (!fs::is_directory(anc, ec))
    user_fail(tag, "{} '{}' cannot be created: '{}' is {}, not a directory", what, path, anc,
              file_kind(anc).empty() ? "a file" : file_kind(anc));
  if (const std::string why = probe_create(anc); !why.empty())
    user_fail(tag, "{} '{}' cannot be created: cannot create entries in '{}': {}", what, path, anc,
              why);
}

}  // namespace strata
