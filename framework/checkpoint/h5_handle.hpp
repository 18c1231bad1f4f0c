// RAII ownership of HDF5 identifiers (hid_t) and STRATA_CHECK_H5, which turns a failed HDF5 call
// into a strata::Error naming the call, HDF5's own message, and the source file and line.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace strata::checkpoint::h5 {

// Owns one hid_t and closes it with the matching H5?close on destruction.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id(Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Id& operator=(Id&& o) noexcept;
  ~Id() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now, ignoring errors (destructor path).
  void reset() noexcept;
  // Gives up ownership: returns the id, which the caller closes.
  hid_t release() noexcept { return std::exchange(id_, H5I_INVALID_HID); }
  // Closes now and throws if HDF5 reports an error (a file's close flushes its data).
  void close(const char* what);

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Turns off HDF5's printing of error stacks to stderr for the calling thread (errors become
// exceptions instead). Called by every helper that opens or creates a file, and before closing.
void quiet_errors();

// HDF5's description of the most recent error on this thread (innermost first, a few levels, on
// one line; an I/O error as its strerror text), and clears the error stack. Empty when none.
std::string last_error();

// Throws "[checkpoint] <context>: <last_error()>": a NoSpaceError when HDF5 failed for lack of
// space (ENOSPC, EDQUOT), else strata::Error. `path` is the file concerned.
[[noreturn]] void fail_with_last_error(const std::string& context, const std::string& path);

// Throws strata::Error("[checkpoint] HDF5 call `call` failed: <HDF5 message> (at file:line)").
[[noreturn]] void fail_call(const char* call, const char* file, int line);

// The closer of a file created for writing (h5_io's create_file). HDF5 1.10 must never fail to
// flush a file: a failed flush leaves its metadata cache unable to close the file, the file is
// freed but its ID kept, and the library crashes closing it again at exit (H5F__close_cb from
// H5_term_library). So the disk blocks of the whole file are reserved first (posix_fallocate:
// the data is written already, the holes HDF5's metadata fills at close are allocated); when
// they cannot be (a full disk), HDF5's writes go to memory, the close succeeds, and -1 is
// returned with an error saying so (ENOSPC).
herr_t close_created_file(hid_t file);

// Closes a file created for writing whose contents are to be thrown away (a failed save):
// HDF5's remaining writes go to memory, so a full disk cannot make the close fail.
void discard_file(Id& file) noexcept;

// From now on HDF5 reads and writes `file` (created for writing, sec2 driver) in an anonymous
// in-memory file instead of on the disk: its descriptor is replaced by one of a memfd holding
// nothing yet. Returns another descriptor of that memory file (the caller closes it; it outlives
// the HDF5 file, to copy HDF5's bytes out after the close), or -1 when this is not possible.
int divert_writes_to_memory(hid_t file);

}  // namespace strata::checkpoint::h5

// STRATA_CHECK_H5(H5Dwrite(...)): evaluates the call once; a negative result (HDF5's failure value
// for herr_t, hid_t and htri_t alike) throws. Yields the call's result.
#define STRATA_CHECK_H5(call)                                         \
  ([&]() {                                                            \
    auto strata_h5_result_ = (call);                                  \
    if (strata_h5_result_ < 0) [[unlikely]]                           \
      ::strata::checkpoint::h5::fail_call(#call, __FILE__, __LINE__); \
    return strata_h5_result_;                                         \
  }())
