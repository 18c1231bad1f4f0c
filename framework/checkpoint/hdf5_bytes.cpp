#include "framework/checkpoint/hdf5_bytes.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/raw_io.hpp"

namespace strata::checkpoint {

Extents complement(Extents data, std::uint64_t file_size) {
  std::sort(data.begin(), data.end());
  Extents out;
  std::uint64_t pos = 0;
  for (const auto& [off, len] : data) {
    if (off > pos) out.push_back({pos, std::min(off, file_size) - pos});
    pos = std::max(pos, off + len);
    if (pos >= file_size) break;
  }
  if (pos < file_size) out.push_back({pos, file_size - pos});
  return out;
}

std::uint32_t checksum_extents(int fd, const std::string& path, const Extents& extents,
                               std::uint64_t file_size) {
  std::uint32_t crc = 0;
  std::vector<unsigned char> buf;
  for (const auto& [off, len] : extents) {
    if (off > file_size || len > file_size - off)
      corrupt(path, "", "HDF5's bytes [{}, {}) lie past the end of the file ({} bytes)", off,
              off + len, file_size);
    for (std::uint64_t at = off; at < off + len;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(off + len - at, 1 << 20));
      buf.resize(n);
      pread_all(fd, buf.data(), n, at, path);
      crc = crc32(buf.data(), n, crc);
      at += n;
    }
  }
  return crc;
}

void verify_hdf5_bytes(const std::string& path, const Extents& extents,
                       const std::optional<std::uint32_t>& checksum) {
  if (!checksum) return;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) corrupt(path, "", "cannot open: {}", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) corrupt(path, "", "cannot stat: {}", std::strerror(errno));
  std::uint32_t got = 0;
  try {
    got = checksum_extents(fd.get(), path, extents, static_cast<std::uint64_t>(st.st_size));
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    corrupt(path, "", "cannot read HDF5's bytes: {}", std::string(e.what()).substr(13));
  }
  if (got != *checksum)
    corrupt(path, "",
            "HDF5's bytes (metadata) do not match the manifest: manifest says {}, file gives {} "
            "(damaged or replaced)",
            format_checksum(*checksum), format_checksum(got));
}

}  // namespace strata::checkpoint
