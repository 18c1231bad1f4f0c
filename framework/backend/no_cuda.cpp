// CUDA stubs for builds without the toolkit: report "not compiled" and refuse device memory.
#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"

#ifndef STRATA_HAVE_CUDA
namespace strata::cuda {

bool compiled() { return false; }
int device_count() { return 0; }
std::string describe_devices() { return "none (Strata built without CUDA)"; }
std::string runtime_version() { return "not compiled"; }
DeviceProperties device_properties(int) { return {}; }
void* malloc_device(std::size_t, int) {
  user_fail("cuda", "this Strata build has no CUDA support: rebuild with -DSTRATA_WITH_CUDA=ON "
            "on a machine with the CUDA toolkit, or run on the cpu device");
}
void* malloc_device_nothrow(std::size_t bytes, int device) { return malloc_device(bytes, device); }
DeviceMemoryInfo device_memory_info(int) { return {}; }
void free_device(void*, int) {}
void* malloc_pinned(std::size_t) { return nullptr; }
void free_pinned(void*) {}
void memcpy(void*, const void*, std::size_t, CopyKind) {
  user_fail("cuda", "this Strata build has no CUDA support");
}
void* stream_create(int) {
  user_fail("cuda", "a CUDA stream was asked for but this Strata build has no CUDA support");
}
void stream_destroy(void*) {}
void stream_synchronize(void*) {}
std::uint64_t host_waits() { return 0; }
void note_host_wait() {}
CopiedBytes copied_bytes() { return {}; }
void* event_create(int) {
  user_fail("cuda", "a CUDA event was asked for but this Strata build has no CUDA support");
}
void event_destroy(void*) {}
void event_record(void*, void*) {}
void stream_wait_event(void*, void*) {}
void event_synchronize(void*) {}
bool event_query(void*) { return true; }
void memcpy_async(void*, const void*, std::size_t, CopyKind, void*) {
  user_fail("cuda", "this Strata build has no CUDA support");
}
void memset_async(void*, int, std::size_t, void*) {
  user_fail("cuda", "this Strata build has no CUDA support");
}
void fill_async(void*, const void*, std::size_t, std::size_t, void*) {
  user_fail("cuda", "this Strata build has no CUDA support");
}

}  // namespace strata::cuda
#endif
