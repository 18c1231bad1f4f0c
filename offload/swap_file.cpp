#include "offload/swap_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"
#include "offload/host_buffer.hpp"

namespace strata::offload {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "host";
  std::string h(buf);
  for (char& c : h)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  return h.empty() ? "host" : h;
}

std::string free_space(const std::string& path) {
  struct statvfs st{};
  if (statvfs(path.c_str(), &st) != 0) return "unknown";
  return format_bytes(static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize);
}

}  // namespace

SwapFile::SwapFile(const std::string& dir, int rank, const std::string& what, Category category,
                   MemoryLedger& ledger, bool meta)
    : meta_(meta), category_(category), ledger_(ledger) {
  if (meta) {
    path_ = (fs::path(dir) / fmt::format("strata-plan-rank{}-{}.swp", rank, what)).string();
    return;
  }
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    user_fail("offload", "nvme_path {} is not a directory (it is a file): point nvme_path at a "
              "directory on the NVMe drive", dir);
  fs::create_directories(dir, ec);
  if (ec)
    user_fail("offload", "cannot create nvme_path directory {}: {}", dir, ec.message());
  remove_stale_swap_files(dir);
  path_ = (fs::path(dir) / fmt::format("strata-{}-pid{}-rank{}-{}.swp", host_name(),
                                       static_cast<long>(getpid()), rank, what))
              .string();
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd_ < 0 && errno == EINVAL) {  // e.g. tmpfs: no O_DIRECT
    direct_ = false;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  if (fd_ < 0) {
    const int e = errno;
    user_fail("offload", "cannot create swap file {}: {}{}", path_, std::strerror(e),
              e == EACCES || e == EROFS ? " (nvme_path must be a writable directory)" : "");
  }
}

SwapFile::~SwapFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  if (size_ > 0) ledger_.release(Tier::nvme, category_, size_);
}

std::uint64_t SwapFile::grow(std::uint64_t bytes) {
  bytes = round_up_io(bytes);
  const std::uint64_t off = size_;
  if (bytes == 0) return off;
  ledger_.charge(Tier::nvme, category_, bytes);  // throws OutOfMemory past strata.memory.nvme_limit
  if (meta_) {
    size_ = off + bytes;
    return off;
  }
  int rc = ::posix_fallocate(fd_, static_cast<off_t>(off), static_cast<off_t>(bytes));
  if (rc == EOPNOTSUPP || rc == EINVAL) {  // no fallocate here: a sparse file still reads zeros
    rc = ::ftruncate(fd_, static_cast<off_t>(off + bytes)) == 0 ? 0 : errno;
  }
  if (rc != 0) {
    ledger_.release(Tier::nvme, category_, bytes);
    fail("offload", "cannot reserve {} more for swap file {} (it would hold {}): {}{}; {} free "
         "there",
         format_bytes(bytes), path_, format_bytes(off + bytes), std::strerror(rc),
         rc == ENOSPC ? " — the drive holding nvme_path is full" : "",
         free_space(fs::path(path_).parent_path().string()));
  }
  size_ = off + bytes;
  return off;
}

int remove_stale_swap_files(const std::string& dir) {
  static const std::regex re(R"(strata-(.+)-pid([0-9]+)-rank[0-9]+-.+\.swp)");
  const std::string me = host_name();
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, re) || m[1] != me) continue;
    const long pid = std::stol(m[2]);
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    if (fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace strata::offload
