// The bytes of a rank file that HDF5 itself wrote — its metadata and the rank state: everything
// but the datasets' data, which has checksums of its own. The manifest records where they lie
// and their CRC-32, so a damaged file is refused before HDF5 parses it (HDF 1.10 can crash on
// damaged metadata, e.g. in its global heap).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::checkpoint {

// (offset, length) pairs, ascending and disjoint.
using Extents = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// [0, file_size) less the ranges in `data` ((offset, length), any order), merged.
Extents complement(Extents data, std::uint64_t file_size);

// CRC-32 of the bytes of `fd` in `extents`, in order. Throws CheckpointError naming `path` when
// an extent lies past `file_size`.
std::uint32_t checksum_extents(int fd, const std::string& path, const Extents& extents,
                               std::uint64_t file_size);

// Checks `path` against a manifest's record of its HDF5 bytes: CheckpointError("... HDF5's bytes
// (metadata) do not match the manifest ...") when they differ. Nothing to check without one.
void verify_hdf5_bytes(const std::string& path, const Extents& extents,
                       const std::optional<std::uint32_t>& checksum);

}  // namespace strata::checkpoint
