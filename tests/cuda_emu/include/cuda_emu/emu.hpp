// The CPU emulator behind the stand-in cuda_runtime.h (included from there, after the vector
// types and error codes). A launch runs its blocks one after another; the threads of a block are
// fibers (ucontext) that switch only at __syncthreads and at warp collectives (shuffles, ballots,
// __syncwarp). Between two barriers each warp runs up to the next barrier as a whole, warp after
// warp, lanes in turn; the order of blocks, warps and lanes is forward, reverse or random
// (set_order), so a result that depends on the order between barriers shows up as a difference
// between runs. Shared memory is allocated per block with the exact size asked (AddressSanitizer
// sees overruns) and filled with NaN bytes (0xff: NaN as f32, f64, bf16 and f16) or, for integer
// variables, 0xa5, so a read of an unwritten element shows. Device memory is host memory the
// emulator keeps a list of, so kernel arguments and copies are checked to be device pointers.
//
// Misuse is reported on stderr and counted (error_count()); a divergent barrier or warp
// collective cannot be continued and aborts the process with a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace emu {

// ---- configuration ----
enum class Order { forward, reverse, random };
// The order of blocks, warps and lanes of the following launches (random: from `seed`).
void set_order(Order order, unsigned seed = 1);
Order order();

// The device the launches are checked against (defaults: an H100, sm_90).
struct DeviceModel {
  int cc_major = 9, cc_minor = 0;
  int sms = 132;
  std::size_t static_smem_limit = 48 * 1024;          // static shared memory per block
  std::size_t default_dyn_smem_limit = 48 * 1024;     // dynamic, without opting in
  std::size_t max_smem_optin = 227 * 1024;            // static + dynamic, opted in
  // The virtual architecture the device's code was compiled from, as cudaFuncGetAttributes
  // reports it (ptxVersion): the emulated kernels are compiled as sm_90's (__CUDA_ARCH__ 900); 75
  // stands for a build for sm_75 alone that the driver compiled for this device.
  int ptx_version = 90;
};
void set_device(const DeviceModel& d);
const DeviceModel& device();

// Whether kernel arguments, copies, memsets and the CUB stand-in check that their pointers are
// device memory (cudaMalloc'ed). Off for tests that run ops on host tensors (the framework's
// CPU allocator is not the emulator's).
void set_pointer_checks(bool on);
bool pointer_checks();

// ---- reports ----
// Checks that failed so far (each printed to stderr when it happened).
long long error_count();
// Prints "emu: <message>" and counts an error.
void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints and aborts (a state the emulator cannot continue from).
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Totals, for the tests' summary.
long long launches();
long long blocks_run();
long long barriers();

// ---- runtime API behind cuda_runtime.h ----
cudaError_t take_last_error();
cudaError_t peek_last_error();
void set_last_error(cudaError_t e);
const char* error_string(cudaError_t e);
const char* error_name(cudaError_t e);
cudaError_t device_attribute(int* v, cudaDeviceAttr a, int device);
cudaError_t device_malloc(void** p, std::size_t bytes);
cudaError_t device_free(void* p);
cudaError_t host_alloc(void** p, std::size_t bytes, unsigned flags);
cudaError_t host_free(void* p);
cudaError_t memset_d(void* p, int v, std::size_t n);
cudaError_t memcpy_k(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind);
cudaError_t sync_point();
cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value);
// [p, p + bytes) lies inside one live device allocation (bytes 0: p in [base, base + size]).
bool is_device(const void* p, std::size_t bytes);
// Device allocations alive now (tests check that a launcher frees what it takes).
std::size_t live_device_allocations();

// ---- device side ----
// Where a thread waits: the file and line of its call of __syncthreads or of a warp collective
// (__builtin_FILE/__builtin_LINE as default arguments: the caller's, with GCC and clang alike).
struct Site {
  const char* file;
  unsigned line;
};
void syncthreads(Site at);
int lane_id();

// A warp collective: every lane of the warp deposits a value (at most 8 bytes) and waits until
// all 32 have; then each reads any lane's value. `mask` must be the full warp.
void* collective_slot();
const unsigned char* collective_wait(unsigned mask, Site at);
template <typename T>
struct LaneValues {
  const unsigned char* slots;
  T operator[](int lane) const {
    T v;
    std::memcpy(&v, slots + 8 * lane, sizeof(T));
    return v;
  }
};
template <typename T>
LaneValues<T> warp_collective(unsigned mask, T v, Site at) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a large type");
  std::memcpy(collective_slot(), &v, sizeof(T));
  return {collective_wait(mask, at)};
}

// Storage of the current block for the __shared__ variable identified by `key` (the first call
// in a block allocates and fills it; later calls in the block return the same).
void* shared_storage(const void* key, std::size_t bytes, std::size_t align, unsigned char fill);
template <typename T>
T& static_shared(const void* key) {
  using E = std::remove_all_extents_t<T>;
  const unsigned char fill = std::is_floating_point_v<E> ? 0xff : 0xa5;
  return *static_cast<T*>(shared_storage(key, sizeof(T), alignof(T), fill));
}
// The block's dynamic shared memory (`extern __shared__ T name[]`): the launch's bytes, 0xff.
void* dynamic_shared();
template <typename T>
T* dyn_smem() {
  return static_cast<T*>(dynamic_shared());
}

// ---- launches (what cuda_emu_rewrite makes of kernel<<<grid, block, smem, stream>>>(args)) ----
void check_kernel_pointer(const char* kernel, int index, const void* p);

class Launch {
 public:
  Launch(dim3 grid, dim3 block, std::size_t smem = 0, cudaStream_t stream = nullptr)
      : grid_(grid), block_(block), smem_(smem) {
    static_cast<void>(stream);
  }
  // The kernel's __launch_bounds__ (most threads per block).
  Launch& bounds(unsigned max_threads, int min_blocks = 0) {
    static_cast<void>(min_blocks);
    bounds_ = max_threads;
    return *this;
  }
  // Converts the arguments to the kernel's parameter types once (as a launch does), checks that
  // every non-null pointer among them is device memory, and runs the grid.
  template <typename... P, typename... A>
  void run(void (*kernel)(P...), const char* name, A&&... a) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong argument count");
    std::tuple<std::decay_t<P>...> args(std::forward<A>(a)...);
    std::apply(
        [&](const auto&... x) {
          int i = 0;
          (check_arg(name, i++, x), ...);
        },
        args);
    execute(reinterpret_cast<const void*>(kernel), name, [&] { std::apply(kernel, args); });
  }

 private:
  template <typename T>
  static void check_arg(const char* name, int i, const T& x) {
    if constexpr (std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>)
      check_kernel_pointer(name, i, static_cast<const void*>(x));
  }
  void execute(const void* key, const char* name, const std::function<void()>& body);

  dim3 grid_, block_;
  std::size_t smem_;
  unsigned bounds_ = 1024;
};

}  // namespace emu
