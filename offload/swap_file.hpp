// SwapFile: one rank's swap file on the NVMe tier — created under nvme_path (never elsewhere),
// opened with O_DIRECT, grown with fallocate so a full disk is reported when space is reserved
// (naming the file), charged to the ledger's nvme tier, and removed when the job ends. A meta swap
// file (the memory planner's) is charged the same and touches no disk.
#pragma once

#include <cstdint>
#include <string>

#include "framework/memory/ledger.hpp"

namespace strata::offload {

class SwapFile {
 public:
  // Creates <dir>/strata-<host>-pid<pid>-rank<rank>-<what>.swp (dir is created if missing).
  // Throws UserError naming the path when dir is not a writable directory. meta: no file, no
  // directory; grow() only charges the ledger.
  SwapFile(const std::string& dir, int rank, const std::string& what, Category category,
           MemoryLedger& ledger, bool meta = false);
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // Reserves bytes more at the end and returns their offset (a multiple of 4096). Throws
  // OutOfMemory when the nvme tier's cap is exceeded and Error naming the file when the disk is
  // full.
  std::uint64_t grow(std::uint64_t bytes);

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }
  bool direct() const { return direct_; }  // opened with O_DIRECT (false where the FS refuses it)
  bool meta() const { return meta_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool direct_ = true;
  bool meta_ = false;
  std::uint64_t size_ = 0;
  Category category_;
  MemoryLedger& ledger_;
};

// Removes swap files in dir left by Strata jobs on this host whose process no longer runs (a
// killed job cannot clean up after itself). Returns how many were removed.
int remove_stale_swap_files(const std::string& dir);

}  // namespace strata::offload
