// Small typed helpers over the HDF5 C API used by checkpoint files: create/open files and groups,
// attributes (UTF-8 strings, int64 scalars and arrays), 1-D and shaped datasets of a Strata DType
// (bf16/f16 are stored as their 16-bit patterns, u16, with a "dtype" attribute saying which).
// Everything read from a file is checked (type class, size, extent) before it is used.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/checkpoint/h5_handle.hpp"
#include "framework/core/dtype.hpp"

namespace strata::checkpoint::h5 {

// Truncates an existing file. Metadata is aggregated in 1 MiB blocks, the first at the start,
// and the contiguous datasets' bytes follow each other in the order the datasets are created
// (from 1 MiB on, while the metadata fits), so raw_io.hpp writes them as long runs. Closing it
// reserves the disk blocks of the whole file first (close_created_file), the unused part of the
// metadata block included: up to kMetadataBlockBytes more than the data.
Id create_file(const std::string& path);
inline constexpr std::uint64_t kMetadataBlockBytes = 1 << 20;
Id open_file(const std::string& path);  // read-only
Id create_group(hid_t loc, const std::string& name);
Id open_group(hid_t loc, const std::string& name);
// True if every component of the '/'-separated path exists under loc.
bool has_link(hid_t loc, const std::string& path);
Id open_dataset(hid_t loc, const std::string& path);

bool has_attr(hid_t obj, const std::string& name);
void write_attr(hid_t obj, const std::string& name, const std::string& value);
void write_attr(hid_t obj, const std::string& name, const char* value);
void write_attr(hid_t obj, const std::string& name, std::int64_t value);
void write_attr(hid_t obj, const std::string& name, const std::vector<std::int64_t>& values);
// Readers throw strata::Error when the attribute is missing or of the wrong kind.
std::string read_attr_string(hid_t obj, const std::string& name);
std::int64_t read_attr_i64(hid_t obj, const std::string& name);
std::vector<std::int64_t> read_attr_i64s(hid_t obj, const std::string& name);

// HDF5 file type used to store elements of `t`, and whether an existing dataset's type is that.
hid_t file_type(DType t);
bool type_matches(hid_t type, DType t);
// Human-readable description of a dataset's stored type ("32-bit float", "16-bit unsigned int").
std::string describe_type(hid_t type);

// Writes a dataset of `dims` (row-major) from `data` (elements of t) and returns it open.
Id write_dataset(hid_t loc, const std::string& name, DType t, const std::vector<std::int64_t>& dims,
                 const void* data);
// A 1-D contiguous dataset of n elements whose storage is allocated now and never filled by
// HDF5: the caller writes its bytes at raw_data_offset() (raw_io.hpp).
Id create_contiguous_dataset(hid_t loc, const std::string& name, DType t, std::int64_t n);
// File offset of a dataset's contiguous raw data; nullopt when it has none (chunked, compact,
// or not allocated).
std::optional<std::uint64_t> raw_data_offset(hid_t dataset);
std::vector<std::int64_t> dataset_dims(hid_t dataset);
// Reads a whole dataset (its type must match t; checked by the caller) into out.
void read_dataset(hid_t dataset, DType t, void* out);
// Reads elements [offset, offset + count) of a 1-D dataset into out.
void read_dataset_range(hid_t dataset, DType t, std::int64_t offset, std::int64_t count, void* out);
// Reads a whole floating-point dataset of any float width (or integer) converted to f32.
void read_dataset_as_f32(hid_t dataset, float* out);

// Scalar UTF-8 string dataset (used for JSON documents).
Id write_string_dataset(hid_t loc, const std::string& name, const std::string& text);
std::string read_string_dataset(hid_t dataset);

}  // namespace strata::checkpoint::h5
