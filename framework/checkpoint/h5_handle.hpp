// RAII ownership of HDF5 identifiers (hid_t) and STRATA_CHECK_H5, which turns a failed HDF5 call
// into a strata::Error naming the call, HDF5's own message, and the source file and line.
#pragma once

#include <hdf5.h>

#include <string>

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
  // Closes now and throws if HDF5 reports an error (a file's close flushes its data).
  void close(const char* what);

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Turns off HDF5's printing of error stacks to stderr for the calling thread (errors become
// exceptions instead). Called by every helper that opens or creates a file.
void quiet_errors();

// HDF5's description of the most recent error on this thread (innermost first, a few levels),
// and clears the error stack. Empty when there is none.
std::string last_error();

// Throws strata::Error("[checkpoint] HDF5 call `call` failed: <HDF5 message> (at file:line)").
[[noreturn]] void fail_call(const char* call, const char* file, int line);

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
