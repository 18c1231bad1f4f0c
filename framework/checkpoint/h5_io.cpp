#include "framework/checkpoint/h5_io.hpp"

#include <fmt/format.h>

#include "framework/core/error.hpp"

namespace strata::checkpoint::h5 {

namespace {

Id space_1d(hsize_t n) {
  const hsize_t dims[1] = {n};
  return Id(STRATA_CHECK_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
}

Id utf8_string_type() {
  Id t(STRATA_CHECK_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  STRATA_CHECK_H5(H5Tset_size(t.get(), H5T_VARIABLE));
  STRATA_CHECK_H5(H5Tset_cset(t.get(), H5T_CSET_UTF8));
  return t;
}

hid_t mem_type(DType t) {
  switch (t) {
    case DType::f32:
      return H5T_NATIVE_FLOAT;
    case DType::f64:
      return H5T_NATIVE_DOUBLE;
    case DType::f16:
    case DType::bf16:
    case DType::u16:
      return H5T_NATIVE_UINT16;
    case DType::i8:
      return H5T_NATIVE_INT8;
    case DType::u8:
      return H5T_NATIVE_UINT8;
    case DType::i16:
      return H5T_NATIVE_INT16;
    case DType::i32:
      return H5T_NATIVE_INT32;
    case DType::u32:
      return H5T_NATIVE_UINT32;
    case DType::i64:
      return H5T_NATIVE_INT64;
  }
  fail("checkpoint", "no HDF5 type for dtype {}", static_cast<int>(t));
}

Id open_attr(hid_t obj, const std::string& name) {
  if (STRATA_CHECK_H5(H5Aexists(obj, name.c_str())) <= 0)
    fail("checkpoint", "attribute '{}' is missing", name);
  return Id(STRATA_CHECK_H5(H5Aopen(obj, name.c_str(), H5P_DEFAULT)), H5Aclose);
}

std::int64_t points_of(hid_t space) {
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_NULL) return 0;
  if (cls == H5S_SCALAR) return 1;
  return STRATA_CHECK_H5(H5Sget_simple_extent_npoints(space));
}

}  // namespace

Id create_file(const std::string& path) {
  quiet_errors();
  Id fcpl(STRATA_CHECK_H5(H5Pcreate(H5P_FILE_CREATE)), H5Pclose);
  STRATA_CHECK_H5(
      H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  Id fapl(STRATA_CHECK_H5(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  // Metadata in 1 MiB blocks (the first at the start of the file), and no aggregation of small
  // raw data: the datasets' bytes then follow each other in the order they are created.
  STRATA_CHECK_H5(H5Pset_meta_block_size(fapl.get(), kMetadataBlockBytes));
  STRATA_CHECK_H5(H5Pset_small_data_block_size(fapl.get(), 0));
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get());
  if (f < 0) fail_with_last_error(fmt::format("cannot create HDF5 file '{}'", path), path);
  return Id(f, close_created_file);
}

Id open_file(const std::string& path) {
  quiet_errors();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0)
    fail("checkpoint", "cannot open as HDF5 (missing, truncated or not HDF5): {}", last_error());
  return Id(f, close_created_file);
}

Id create_group(hid_t loc, const std::string& name) {
  // Track creation order so readers list datasets in the order they were written.
  Id gcpl(STRATA_CHECK_H5(H5Pcreate(H5P_GROUP_CREATE)), H5Pclose);
  STRATA_CHECK_H5(
      H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  return Id(STRATA_CHECK_H5(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT)),
            H5Gclose);
}

Id open_group(hid_t loc, const std::string& name) {
  if (!has_link(loc, name)) fail("checkpoint", "group '{}' is missing", name);
  return Id(STRATA_CHECK_H5(H5Gopen2(loc, name.c_str(), H5P_DEFAULT)), H5Gclose);
}

bool has_link(hid_t loc, const std::string& path) {
  std::string prefix;
  std::size_t start = 0;
  if (!path.empty() && path[0] == '/') {
    prefix = "/";
    start = 1;
  }
  while (start <= path.size()) {
    const std::size_t slash = path.find('/', start);
    const std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty()) return false;
    prefix += part;
    if (STRATA_CHECK_H5(H5Lexists(loc, prefix.c_str(), H5P_DEFAULT)) <= 0) return false;
    if (slash == std::string::npos) return true;
    prefix += "/";
    start = slash + 1;
  }
  return false;
}

Id open_dataset(hid_t loc, const std::string& path) {
  if (!has_link(loc, path)) fail("checkpoint", "dataset is missing");
  H5O_info_t info;
  STRATA_CHECK_H5(H5Oget_info_by_name2(loc, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT));
  if (info.type != H5O_TYPE_DATASET) fail("checkpoint", "'{}' is not a dataset", path);
  return Id(STRATA_CHECK_H5(H5Dopen2(loc, path.c_str(), H5P_DEFAULT)), H5Dclose);
}

bool has_attr(hid_t obj, const std::string& name) {
  return STRATA_CHECK_H5(H5Aexists(obj, name.c_str())) > 0;
}

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  Id type = utf8_string_type();
  Id space(STRATA_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  Id attr(STRATA_CHECK_H5(
              H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT)),
          H5Aclose);
  const char* p = value.c_str();
  STRATA_CHECK_H5(H5Awrite(attr.get(), type.get(), &p));
}

void write_attr(hid_t obj, const std::string& name, const char* value) {
  write_attr(obj, name, std::string(value));
}

void write_attr(hid_t obj, const std::string& name, std::int64_t value) {
  Id space(STRATA_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  Id attr(STRATA_CHECK_H5(
              H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)),
          H5Aclose);
  STRATA_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value));
}

void write_attr(hid_t obj, const std::string& name, const std::vector<std::int64_t>& values) {
  Id space =
      values.empty() ? Id(STRATA_CHECK_H5(H5Screate(H5S_NULL)), H5Sclose) : space_1d(values.size());
  Id attr(STRATA_CHECK_H5(
              H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)),
          H5Aclose);
  if (!values.empty()) STRATA_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()));
}

std::string read_attr_string(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(STRATA_CHECK_H5(H5Aget_type(attr.get())), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING)
    fail("checkpoint", "attribute '{}' is not a string", name);
  Id space(STRATA_CHECK_H5(H5Aget_space(attr.get())), H5Sclose);
  if (points_of(space.get()) != 1)
    fail("checkpoint", "attribute '{}' is not a single string", name);
  if (STRATA_CHECK_H5(H5Tis_variable_str(type.get())) > 0) {
    Id mem = utf8_string_type();
    char* p = nullptr;
    STRATA_CHECK_H5(H5Aread(attr.get(), mem.get(), &p));
    std::string out = p ? p : "";
    if (p) H5free_memory(p);
    return out;
  }
  const std::size_t size = H5Tget_size(type.get());
  if (size == 0) fail("checkpoint", "attribute '{}' has zero size", name);
  std::string buf(size, '\0');
  Id mem(STRATA_CHECK_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  STRATA_CHECK_H5(H5Tset_size(mem.get(), size));
  STRATA_CHECK_H5(H5Aread(attr.get(), mem.get(), buf.data()));
  const auto end = buf.find('\0');
  if (end != std::string::npos) buf.resize(end);
  return buf;
}

std::vector<std::int64_t> read_attr_i64s(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(STRATA_CHECK_H5(H5Aget_type(attr.get())), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    fail("checkpoint", "attribute '{}' is not an integer", name);
  Id space(STRATA_CHECK_H5(H5Aget_space(attr.get())), H5Sclose);
  const std::int64_t n = points_of(space.get());
  if (n < 0 || n > 64) fail("checkpoint", "attribute '{}' has {} elements", name, n);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  if (n > 0) STRATA_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()));
  return out;
}

std::int64_t read_attr_i64(hid_t obj, const std::string& name) {
  const auto v = read_attr_i64s(obj, name);
  if (v.size() != 1) fail("checkpoint", "attribute '{}' is not a single integer", name);
  return v[0];
}

hid_t file_type(DType t) {
  switch (t) {
    case DType::f32:
      return H5T_IEEE_F32LE;
    case DType::f64:
      return H5T_IEEE_F64LE;
    case DType::f16:
    case DType::bf16:
    case DType::u16:
      return H5T_STD_U16LE;
    case DType::i8:
      return H5T_STD_I8LE;
    case DType::u8:
      return H5T_STD_U8LE;
    case DType::i16:
      return H5T_STD_I16LE;
    case DType::i32:
      return H5T_STD_I32LE;
    case DType::u32:
      return H5T_STD_U32LE;
    case DType::i64:
      return H5T_STD_I64LE;
  }
  fail("checkpoint", "no HDF5 type for dtype {}", static_cast<int>(t));
}

bool type_matches(hid_t type, DType t) {
  return STRATA_CHECK_H5(H5Tequal(type, file_type(t))) > 0;
}

std::string describe_type(hid_t type) {
  const std::size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      return fmt::format("{}-bit float", bits);
    case H5T_INTEGER:
      return fmt::format("{}-bit {}int{}", bits, H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "",
                         H5Tget_order(type) == H5T_ORDER_BE ? " (big-endian)" : "");
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    default:
      return "unsupported type";
  }
}

Id write_dataset(hid_t loc, const std::string& name, DType t, const std::vector<std::int64_t>& dims,
                 const void* data) {
  std::vector<hsize_t> d(dims.begin(), dims.end());
  Id space =
      d.empty()
          ? Id(STRATA_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose)
          : Id(STRATA_CHECK_H5(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr)),
               H5Sclose);
  Id ds(STRATA_CHECK_H5(H5Dcreate2(loc, name.c_str(), file_type(t), space.get(), H5P_DEFAULT,
                                   H5P_DEFAULT, H5P_DEFAULT)),
        H5Dclose);
  STRATA_CHECK_H5(H5Dwrite(ds.get(), mem_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  return ds;
}

Id create_contiguous_dataset(hid_t loc, const std::string& name, DType t, std::int64_t n) {
  Id space = space_1d(static_cast<hsize_t>(n));
  Id dcpl(STRATA_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  STRATA_CHECK_H5(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS));
  STRATA_CHECK_H5(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  STRATA_CHECK_H5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
  return Id(STRATA_CHECK_H5(H5Dcreate2(loc, name.c_str(), file_type(t), space.get(), H5P_DEFAULT,
                                       dcpl.get(), H5P_DEFAULT)),
            H5Dclose);
}

std::optional<std::uint64_t> raw_data_offset(hid_t dataset) {
  const haddr_t a = H5Dget_offset(dataset);
  if (a == HADDR_UNDEF) {
    last_error();  // clears the error stack HDF5 may have left
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(a);
}

std::vector<std::int64_t> dataset_dims(hid_t dataset) {
  Id space(STRATA_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  const H5S_class_t cls = H5Sget_simple_extent_type(space.get());
  if (cls == H5S_SCALAR) return {};
  if (cls != H5S_SIMPLE) return {0};
  const int rank = STRATA_CHECK_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  STRATA_CHECK_H5(H5Sget_simple_extent_dims(space.get(), d.data(), nullptr));
  return std::vector<std::int64_t>(d.begin(), d.end());
}

void read_dataset(hid_t dataset, DType t, void* out) {
  STRATA_CHECK_H5(H5Dread(dataset, mem_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, out));
}

void read_dataset_range(hid_t dataset, DType t, std::int64_t offset, std::int64_t count,
                        void* out) {
  if (count <= 0) return;
  Id file_space(STRATA_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  const hsize_t start[1] = {static_cast<hsize_t>(offset)};
  const hsize_t n[1] = {static_cast<hsize_t>(count)};
  STRATA_CHECK_H5(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr));
  Id mem_space = space_1d(static_cast<hsize_t>(count));
  STRATA_CHECK_H5(
      H5Dread(dataset, mem_type(t), mem_space.get(), file_space.get(), H5P_DEFAULT, out));
}

void read_dataset_as_f32(hid_t dataset, float* out) {
  STRATA_CHECK_H5(H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out));
}

Id write_string_dataset(hid_t loc, const std::string& name, const std::string& text) {
  Id type = utf8_string_type();
  Id space(STRATA_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  Id ds(STRATA_CHECK_H5(H5Dcreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                   H5P_DEFAULT, H5P_DEFAULT)),
        H5Dclose);
  const char* p = text.c_str();
  STRATA_CHECK_H5(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p));
  return ds;
}

std::string read_string_dataset(hid_t dataset) {
  Id type(STRATA_CHECK_H5(H5Dget_type(dataset)), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) fail("checkpoint", "dataset is not a string");
  Id space(STRATA_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  if (points_of(space.get()) != 1) fail("checkpoint", "dataset is not a single string");
  if (STRATA_CHECK_H5(H5Tis_variable_str(type.get())) > 0) {
    Id mem = utf8_string_type();
    char* p = nullptr;
    STRATA_CHECK_H5(H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p));
    std::string out = p ? p : "";
    if (p) H5free_memory(p);
    return out;
  }
  const std::size_t size = H5Tget_size(type.get());
  std::string buf(size, '\0');
  Id mem(STRATA_CHECK_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  STRATA_CHECK_H5(H5Tset_size(mem.get(), size));
  STRATA_CHECK_H5(H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()));
  const auto end = buf.find('\0');
  if (end != std::string::npos) buf.resize(end);
  return buf;
}

}  // namespace strata::checkpoint::h5
