#include "framework/checkpoint/h5_handle.hpp"

#include <fmt/format.h>

#include <vector>

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
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = H5I_INVALID_HID;
}

void Id::close(const char* what) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  if (closer_ && closer_(id) < 0)
    fail("checkpoint", "HDF5 could not close {}: {}", what, last_error());
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

herr_t collect(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  if (err->desc && *err->desc) out->push_back(fmt::format("{} ({})", err->desc, err->func_name));
  return n >= 3 ? 1 : 0;  // a few levels are enough
}

}  // namespace

std::string last_error() {
  std::vector<std::string> parts;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &parts);
  H5Eclear2(H5E_DEFAULT);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

void fail_call(const char* call, const char* file, int line) {
  const std::string why = last_error();
  fail("checkpoint", "HDF5 call `{}` failed{}{} (at {}:{})", call, why.empty() ? "" : ": ", why,
       file, line);
}

}  // namespace strata::checkpoint::h5
