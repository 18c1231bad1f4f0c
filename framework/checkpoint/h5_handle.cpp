#include "framework/checkpoint/h5_handle.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint::h5 {

Id& Id::operator=(Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Id::reset() noexcept {
  if (id_ >= 0 && closer_) {
    quiet_errors();
    closer_(id_);
  }
  id_ = H5I_INVALID_HID;
}

void Id::close(const char* what) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  quiet_errors();
  if (closer_ && closer_(id) < 0)
    fail_with_last_error(fmt::format("HDF5 could not close {}", what), what);
}

void quiet_errors() {
  // With a thread-safe HDF5 the automatic error printing is per thread.
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

namespace {

struct Collected {
  std::vector<std::string> parts;
  int io_errno = 0;  // from a file driver's "errno = N" (sec2), 0 if none
};

// One level of the stack, on one line. A file driver's failure ("file write failed: time = ...,
// filename = '...', file descriptor = 17, errno = 28, error message = '...', buf = ...", with a
// newline inside the time) becomes "file write failed: No space left on device".
std::string clean(const char* desc, int* io_errno) {
  std::string d = desc;
  if (const auto at = d.find("errno = "); at != std::string::npos) {
    const int e = std::atoi(d.c_str() + at + 8);
    if (e > 0) {
      *io_errno = e;
      const auto colon = d.find(':');
      return fmt::format("{}: {}", d.substr(0, colon), std::strerror(e));
    }
  }
  for (char& c : d)
    if (c == '\n' || c == '\r') c = ' ';
  return d;
}

herr_t collect(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<Collected*>(data);
  if (err->desc && *err->desc)
    out->parts.push_back(fmt::format("{} ({})", clean(err->desc, &out->io_errno), err->func_name));
  return n >= 3 ? 1 : 0;  // a few levels are enough
}

Collected take_stack() {
  Collected c;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &c);
  H5Eclear2(H5E_DEFAULT);
  return c;
}

std::string joined(const Collected& c) {
  std::string out;
  for (const auto& p : c.parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// The sec2 driver's file descriptor of `file`, or -1 (another driver).
int sec2_fd(hid_t file) {
  const hid_t fapl = H5Fget_access_plist(file);
  if (fapl < 0) return -1;
  const hid_t driver = H5Pget_driver(fapl);
  H5Pclose(fapl);
  if (driver != H5FD_SEC2) return -1;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle) return -1;
  return *static_cast<int*>(handle);
}

// Allocates the disk blocks of the whole file, [0, its end): what is written already stays, the
// holes HDF5's metadata will fill at close are reserved. 0, or the errno of the failure.
int reserve_blocks(hid_t file) {
  const int fd = sec2_fd(file);
  hsize_t size = 0;
  if (fd < 0 || H5Fget_filesize(file, &size) < 0 || size == 0) return 0;
  return ::posix_fallocate(fd, 0, static_cast<off_t>(size));
}

}  // namespace

int divert_writes_to_memory(hid_t file) {
  const int fd = sec2_fd(file);
  if (fd < 0) return -1;
  const int mem = ::memfd_create("strata-h5-metadata", MFD_CLOEXEC);
  if (mem < 0) return -1;
  if (::dup2(mem, fd) < 0) {
    ::close(mem);
    return -1;
  }
  return mem;
}

std::string last_error() {
  return joined(take_stack());
}

void fail_with_last_error(const std::string& context, const std::string& path) {
  const Collected c = take_stack();
  const std::string why = joined(c);
  const std::string msg = fmt::format("{}{}{}", context, why.empty() ? "" : ": ", why);
  if (is_no_space_errno(c.io_errno)) throw NoSpaceError(path, msg);
  throw Error("checkpoint", msg);
}

void fail_call(const char* call, const char* file, int line) {
  const Collected c = take_stack();
  const std::string why = joined(c);
  const std::string msg = fmt::format("HDF5 call `{}` failed{}{} (at {}:{})", call,
                                      why.empty() ? "" : ": ", why, file, line);
  if (is_no_space_errno(c.io_errno)) throw NoSpaceError("", msg);
  throw Error("checkpoint", msg);
}

herr_t close_created_file(hid_t file) {
  quiet_errors();
  const int err = reserve_blocks(file);
  if (!is_no_space_errno(err)) return H5Fclose(file);
  // No room for what the close writes: it goes to memory, and the close reports the shortage.
  const int mem = divert_writes_to_memory(file);
  if (mem >= 0) ::close(mem);
  H5Fclose(file);
  H5Epush2(H5E_DEFAULT, __FILE__, "close_created_file", __LINE__, H5E_ERR_CLS, H5E_FILE,
           H5E_WRITEERROR, "cannot reserve the space to close the file: errno = %d", err);
  return -1;
}

void discard_file(Id& file) noexcept {
  if (!file.valid()) return;
  quiet_errors();
  const int mem = divert_writes_to_memory(file.get());
  if (mem >= 0) ::close(mem);
  H5Fclose(file.release());  // not the closer: nothing to reserve on the disk
  H5Eclear2(H5E_DEFAULT);
}

}  // namespace strata::checkpoint::h5
