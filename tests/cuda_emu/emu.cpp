// The emulator's engine (include/cuda_emu/emu.hpp): fibers, the block scheduler, shared and device
// memory, the runtime calls of the stand-in cuda_runtime.h.
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <vector>

#if defined(CUDA_EMU_ASAN)
// set by the build: this file is compiled without instrumentation, the kernels with it
#elif defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_ASAN 1
#endif
#endif
#if CUDA_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu {
namespace {

// ---- state ----
Order g_order = Order::forward;
std::mt19937 g_rng(1);
DeviceModel g_device;
long long g_errors = 0, g_launches = 0, g_blocks = 0, g_barriers = 0;
cudaError_t g_last = cudaSuccess;
bool g_pointer_checks = true;

std::map<std::uintptr_t, std::size_t> g_dev;  // device allocations: base -> bytes
std::set<void*> g_pinned;
std::map<const void*, int> g_dyn_limit;  // cudaFuncAttributeMaxDynamicSharedMemorySize

// ---- fibers ----
// Each emulated thread runs on its own stack. On x86-64 a fiber switch is a few instructions
// (cuda_emu_switch below: the callee-saved registers and the stack pointer); elsewhere it is
// swapcontext, which also saves the signal mask (a system call per switch: slower).
constexpr int kMaxThreads = 1024;
constexpr std::size_t kStackBytes = 256 * 1024;
constexpr std::size_t kGuardBytes = 64 * 1024;

enum State : unsigned char { kRun, kBarrier, kWarp, kDone };

#if defined(__x86_64__)
#define CUDA_EMU_ASM_SWITCH 1
}  // namespace
}  // namespace emu
// cuda_emu_switch(&save, next): pushes rbp, rbx, r12-r15, stores rsp in *save, loads next as rsp,
// pops the same registers from there and returns on that stack.
extern "C" void cuda_emu_switch(void** save, void* next);
asm(R"(
  .text
  .p2align 4
  .globl cuda_emu_switch
  .hidden cuda_emu_switch
  .type cuda_emu_switch,@function
cuda_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_emu_switch, .-cuda_emu_switch
)");
namespace emu {
namespace {
#endif

struct Fiber {
  char* stack = nullptr;  // kStackBytes, above a PROT_NONE guard
  void* fake_stack = nullptr;
#if CUDA_EMU_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
};

Fiber* g_fibers = nullptr;  // kMaxThreads, never moved (a ucontext_t points into itself)
#if CUDA_EMU_ASM_SWITCH
void* g_sched_sp = nullptr;
#else
ucontext_t g_sched;
#endif
[[maybe_unused]] void* g_sched_fake = nullptr;  // AddressSanitizer's fiber bookkeeping
[[maybe_unused]] const void* g_main_bottom = nullptr;
[[maybe_unused]] std::size_t g_main_size = 0;

// The block being run.
int g_nthreads = 0, g_cur = -1;
const std::function<void()>* g_body = nullptr;
const char* g_kernel = "";
std::vector<State> g_state;
std::vector<Site> g_site;  // where a waiting thread waits
std::vector<unsigned> g_mask;
std::vector<unsigned> g_gen;              // warp collectives a thread has entered
std::vector<unsigned char> g_slots[2];    // [generation & 1][thread * 8]

struct SharedVar {
  const void* key;
  void* p;
  std::size_t bytes, align;
};
std::vector<SharedVar> g_shared;
void* g_dyn = nullptr;
std::size_t g_dyn_bytes = 0;
std::size_t g_static_bytes = 0;

void init_fibers() {
  if (g_fibers) return;
  g_fibers = new Fiber[kMaxThreads];
}

char* fiber_stack(int t) {
  Fiber& f = g_fibers[t];
  if (!f.stack) {
    void* m = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fatal("cannot map a fiber stack");
    mprotect(m, kGuardBytes, PROT_NONE);  // a stack overflow faults instead of corrupting
    f.stack = static_cast<char*>(m) + kGuardBytes;
#if !CUDA_EMU_ASM_SWITCH
    if (getcontext(&f.ctx) != 0) fatal("getcontext failed");
#endif
  }
  return f.stack;
}

void set_index(int t) {
  threadIdx.x = t % blockDim.x;
  threadIdx.y = (t / blockDim.x) % blockDim.y;
  threadIdx.z = t / (blockDim.x * blockDim.y);
}

// Fiber side: back to the scheduler (state already set); returns when scheduled again.
void yield_to_scheduler() {
  Fiber& f = g_fibers[g_cur];
#if CUDA_EMU_ASAN
  __sanitizer_start_switch_fiber(&f.fake_stack, g_main_bottom, g_main_size);
#endif
#if CUDA_EMU_ASM_SWITCH
  cuda_emu_switch(&f.sp, g_sched_sp);
#else
  swapcontext(&f.ctx, &g_sched);
#endif
#if CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, &g_main_bottom, &g_main_size);
#endif
}

// The first code of every fiber; it never returns (the scheduler does not resume a done one).
void fiber_main() {
#if CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_main_bottom, &g_main_size);
#endif
  (*g_body)();
  g_state[static_cast<std::size_t>(g_cur)] = kDone;
  Fiber& f = g_fibers[g_cur];
#if CUDA_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, g_main_bottom, g_main_size);  // this fiber ends
#endif
#if CUDA_EMU_ASM_SWITCH
  cuda_emu_switch(&f.sp, g_sched_sp);
#else
  swapcontext(&f.ctx, &g_sched);
#endif
  std::abort();
}

// Makes thread t start at fiber_main on its stack when next resumed.
void fiber_reset(int t) {
  char* stack = fiber_stack(t);
  Fiber& f = g_fibers[t];
#if CUDA_EMU_ASM_SWITCH
  // The frame cuda_emu_switch pops: six registers, then the "return address" fiber_main, above
  // which a zero slot stands for fiber_main's own return address (so that its rsp is 8 mod 16,
  // as after a call).
  auto* top = reinterpret_cast<std::uintptr_t*>(stack + kStackBytes);  // 16-byte aligned
  top[-1] = 0;
  top[-2] = reinterpret_cast<std::uintptr_t>(&fiber_main);
  for (int i = 3; i <= 8; ++i) top[-i] = 0;
  f.sp = top - 8;
#else
  f.ctx.uc_stack.ss_sp = stack;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, fiber_main, 0);
#endif
}

// Scheduler side: runs thread t until it waits or ends.
void resume(int t) {
  g_cur = t;
  set_index(t);
  Fiber& f = g_fibers[t];
#if CUDA_EMU_ASAN
  __sanitizer_start_switch_fiber(&g_sched_fake, f.stack, kStackBytes);
#endif
#if CUDA_EMU_ASM_SWITCH
  cuda_emu_switch(&g_sched_sp, f.sp);
#else
  swapcontext(&g_sched, &f.ctx);
#endif
#if CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(g_sched_fake, nullptr, nullptr);
#endif
  g_cur = -1;
}

inline bool same_site(const Site& a, const Site& b) {
  return a.line == b.line &&
         (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

// The order of n indices for the current mode: forward and reverse ones are built once.
const std::vector<int>& ordered(std::vector<int>& buf, int n) {
  static std::vector<int> fwd, rev;
  if (static_cast<int>(fwd.size()) < n) {
    fwd.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) fwd[static_cast<std::size_t>(i)] = i;
  }
  if (g_order == Order::forward) {
    buf.assign(fwd.begin(), fwd.begin() + n);
    return buf;
  }
  buf.assign(fwd.begin(), fwd.begin() + n);
  if (g_order == Order::reverse) std::reverse(buf.begin(), buf.end());
  else std::shuffle(buf.begin(), buf.end(), g_rng);
  return buf;
}

const char* where() {
  static char buf[160];
  std::snprintf(buf, sizeof buf, "kernel %s block (%u,%u,%u)", g_kernel, blockIdx.x, blockIdx.y,
                blockIdx.z);
  return buf;
}

void run_block() {
  const int n = g_nthreads;
  for (int t = 0; t < n; ++t) {
    fiber_reset(t);
    g_state[static_cast<std::size_t>(t)] = kRun;
    g_gen[static_cast<std::size_t>(t)] = 0;
  }
  const int nw = (n + 31) / 32;
  static std::vector<int> worder, lorder;
  for (;;) {
    ordered(worder, nw);
    for (int w : worder) {
      const int l0 = w * 32, l1 = std::min(n, l0 + 32);
      // Run the warp's lanes until none can go on: all at the block barrier or done, or all at
      // one warp collective (then released together).
      for (;;) {
        ordered(lorder, 32);
        for (int li : lorder) {
          const int t = l0 + li;
          if (t < l1 && g_state[static_cast<std::size_t>(t)] == kRun) resume(t);
        }
        int at_warp = 0, at_barrier = 0, done = 0;
        for (int t = l0; t < l1; ++t) {
          const State s = g_state[static_cast<std::size_t>(t)];
          at_warp += s == kWarp;
          at_barrier += s == kBarrier;
          done += s == kDone;
        }
        if (at_warp == 0) break;
        // A warp collective: every lane of a whole warp, at the same call, with the full mask.
        const int first = [&] {
          for (int t = l0; t < l1; ++t)
            if (g_state[static_cast<std::size_t>(t)] == kWarp) return t;
          return l0;
        }();
        const Site& s0 = g_site[static_cast<std::size_t>(first)];
        if (l1 - l0 != 32 || at_warp != 32)
          fatal("%s: warp %d: a warp collective at %s:%u reached by %d of 32 lanes (%d at a "
                "__syncthreads, %d exited, %d absent: the block is not a multiple of 32)",
                where(), w, s0.file, s0.line, at_warp, at_barrier, done, 32 - (l1 - l0));
        for (int t = l0; t < l1; ++t) {
          const Site& s = g_site[static_cast<std::size_t>(t)];
          if (!same_site(s, s0))
            fatal("%s: warp %d: lanes at different warp collectives (%s:%u and %s:%u)", where(), w,
                  s0.file, s0.line, s.file, s.line);
          if (g_mask[static_cast<std::size_t>(t)] != 0xffffffffu)
            fatal("%s: warp collective at %s:%u with mask %#x (only full-warp masks are "
                  "emulated)",
                  where(), s.file, s.line, g_mask[static_cast<std::size_t>(t)]);
        }
        for (int t = l0; t < l1; ++t) g_state[static_cast<std::size_t>(t)] = kRun;
      }
    }
    int done = 0, waiting = 0, first = -1;
    for (int t = 0; t < n; ++t) {
      const State s = g_state[static_cast<std::size_t>(t)];
      done += s == kDone;
      if (s == kBarrier) {
        ++waiting;
        if (first < 0) first = t;
      }
    }
    if (done == n) return;
    const Site& s0 = g_site[static_cast<std::size_t>(first)];
    if (done != 0)
      fatal("%s: %d threads wait at __syncthreads (%s:%u) while %d have exited", where(), waiting,
            s0.file, s0.line, done);
    for (int t = 0; t < n; ++t) {
      const Site& s = g_site[static_cast<std::size_t>(t)];
      if (!same_site(s, s0))
        fatal("%s: threads wait at different __syncthreads (%s:%u, thread %d at %s:%u)", where(),
              s0.file, s0.line, t, s.file, s.line);
    }
    for (int t = 0; t < n; ++t) g_state[static_cast<std::size_t>(t)] = kRun;
    ++g_barriers;
  }
}

void free_block_memory() {
  for (SharedVar& v : g_shared) ::operator delete(v.p, std::align_val_t(v.align));
  g_shared.clear();
  if (g_dyn) ::operator delete(g_dyn, std::align_val_t(16));
  g_dyn = nullptr;
}

void vreport(const char* fmt, va_list ap) {
  std::fputs("emu: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

bool any_device_byte(const void* p) { return is_device(p, 0); }

}  // namespace

// ---- configuration and reports ----
void set_order(Order order, unsigned seed) {
  g_order = order;
  g_rng.seed(seed);
}
Order order() { return g_order; }
void set_device(const DeviceModel& d) { g_device = d; }
void set_pointer_checks(bool on) { g_pointer_checks = on; }
bool pointer_checks() { return g_pointer_checks; }
const DeviceModel& device() { return g_device; }
long long error_count() { return g_errors; }
long long launches() { return g_launches; }
long long blocks_run() { return g_blocks; }
long long barriers() { return g_barriers; }

void report(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
  ++g_errors;
}

void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
  std::fputs("emu: fatal: aborting\n", stderr);
  std::abort();
}

// ---- runtime API ----
cudaError_t take_last_error() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t peek_last_error() { return g_last; }
void set_last_error(cudaError_t e) { g_last = e; }

const char* error_name(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
const char* error_string(cudaError_t e) { return error_name(e); }

cudaError_t device_attribute(int* v, cudaDeviceAttr a, int dev) {
  if (dev != 0) return cudaErrorInvalidDevice;
  switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = static_cast<int>(g_device.static_smem_limit); return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *v = g_device.sms; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = g_device.cc_major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = g_device.cc_minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = static_cast<int>(g_device.max_smem_optin); return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

cudaError_t device_malloc(void** p, std::size_t bytes) {
  if (bytes == 0) {
    *p = nullptr;
    return cudaSuccess;
  }
  // Exactly `bytes` (AddressSanitizer sees overruns), 256-byte aligned as cudaMalloc's, and
  // filled with 0xff: uninitialised device memory reads as NaN.
  void* m = ::operator new(bytes, std::align_val_t(256));
  std::memset(m, 0xff, bytes);
  g_dev[reinterpret_cast<std::uintptr_t>(m)] = bytes;
  *p = m;
  return cudaSuccess;
}

cudaError_t device_free(void* p) {
  if (!p) return cudaSuccess;
  auto it = g_dev.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == g_dev.end()) {
    report("cudaFree(%p): not a device allocation", p);
    return cudaErrorInvalidDevicePointer;
  }
  g_dev.erase(it);
  ::operator delete(p, std::align_val_t(256));
  return cudaSuccess;
}

cudaError_t host_alloc(void** p, std::size_t bytes, unsigned flags) {
  static_cast<void>(flags);
  void* m = ::operator new(bytes ? bytes : 1);
  std::memset(m, 0xff, bytes);
  g_pinned.insert(m);
  *p = m;
  return cudaSuccess;
}

cudaError_t host_free(void* p) {
  if (!p) return cudaSuccess;
  if (!g_pinned.erase(p)) {
    report("cudaFreeHost(%p): not a pinned host allocation", p);
    return cudaErrorInvalidValue;
  }
  ::operator delete(p);
  return cudaSuccess;
}

bool is_device(const void* p, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_dev.upper_bound(a);
  if (it == g_dev.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

std::size_t live_device_allocations() { return g_dev.size(); }

cudaError_t memset_d(void* p, int v, std::size_t n) {
  if (n == 0) return cudaSuccess;
  if (g_pointer_checks && !is_device(p, n)) {
    report("cudaMemset(%p, %d, %zu): not inside one device allocation", p, v, n);
    return cudaErrorInvalidValue;
  }
  std::memset(p, v, n);
  return cudaSuccess;
}

cudaError_t memcpy_k(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  if (n == 0) return cudaSuccess;
  const bool dd = is_device(dst, n), sd = is_device(src, n);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToHost: ok = !any_device_byte(dst) && !any_device_byte(src); break;
    case cudaMemcpyHostToDevice: ok = dd && !any_device_byte(src); break;
    case cudaMemcpyDeviceToHost: ok = sd && !any_device_byte(dst); break;
    case cudaMemcpyDeviceToDevice: ok = dd && sd; break;
    case cudaMemcpyDefault: ok = true; break;
    default:
      report("cudaMemcpy: bad kind %d", static_cast<int>(kind));
      return cudaErrorInvalidMemcpyDirection;
  }
  if (!ok && g_pointer_checks) {
    report("cudaMemcpy(%p, %p, %zu, kind %d): the pointers do not match the kind (dst %s, src %s)",
           dst, src, n, static_cast<int>(kind), dd ? "device" : "host", sd ? "device" : "host");
    return cudaErrorInvalidValue;
  }
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  if (d < s + n && s < d + n) {
    report("cudaMemcpy(%p, %p, %zu): overlapping ranges", dst, src, n);
    return cudaErrorInvalidValue;
  }
  std::memcpy(dst, src, n);
  return cudaSuccess;
}

cudaError_t sync_point() { return cudaSuccess; }

cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<std::size_t>(value) > g_device.max_smem_optin) {
      report("cudaFuncSetAttribute: %d bytes of dynamic shared memory exceed the device's %zu",
             value, g_device.max_smem_optin);
      return cudaErrorInvalidValue;
    }
    g_dyn_limit[func] = value;
    return cudaSuccess;
  }
  return cudaSuccess;
}

// ---- device side ----
void syncthreads(Site at) {
  if (g_cur < 0) fatal("__syncthreads outside a kernel (%s:%u)", at.file, at.line);
  g_site[static_cast<std::size_t>(g_cur)] = at;
  g_state[static_cast<std::size_t>(g_cur)] = kBarrier;
  yield_to_scheduler();
}

int lane_id() {
  if (g_cur < 0) fatal("a warp collective outside a kernel");
  return g_cur & 31;
}

void* collective_slot() {
  const auto t = static_cast<std::size_t>(g_cur);
  return &g_slots[g_gen[t] & 1][t * 8];
}

const unsigned char* collective_wait(unsigned mask, Site at) {
  const auto t = static_cast<std::size_t>(g_cur);
  g_site[t] = at;
  g_mask[t] = mask;
  g_state[t] = kWarp;
  yield_to_scheduler();
  // Lanes write the other buffer at their next collective, which cannot complete before every
  // lane of the warp has left this one (read its values).
  const unsigned gen = g_gen[t]++;
  return &g_slots[gen & 1][(t & ~static_cast<std::size_t>(31)) * 8];
}

void* shared_storage(const void* key, std::size_t bytes, std::size_t align, unsigned char fill) {
  if (g_cur < 0) fatal("__shared__ variable used outside a kernel");
  for (const SharedVar& v : g_shared)
    if (v.key == key) return v.p;
  if (align < alignof(std::max_align_t)) align = alignof(std::max_align_t);
  void* p = ::operator new(bytes, std::align_val_t(align));
  std::memset(p, fill, bytes);
  g_shared.push_back({key, p, bytes, align});
  g_static_bytes += bytes;
  return p;
}

void* dynamic_shared() {
  if (g_cur < 0) fatal("extern __shared__ memory used outside a kernel");
  return g_dyn;
}

void check_kernel_pointer(const char* kernel, int index, const void* p) {
  if (g_pointer_checks && p && !is_device(p, 0))
    report("kernel %s: argument %d (%p) is not device memory", kernel, index, p);
}

void Launch::execute(const void* key, const char* name, const std::function<void()>& body) {
  ++g_launches;
  const unsigned long long threads =
      static_cast<unsigned long long>(block_.x) * block_.y * block_.z;
  const char* bad = nullptr;
  if (grid_.x == 0 || grid_.y == 0 || grid_.z == 0) bad = "a grid dimension is 0";
  else if (grid_.x > 0x7fffffffu || grid_.y > 65535 || grid_.z > 65535) bad = "grid too large";
  else if (threads == 0 || block_.x > 1024 || block_.y > 1024 || block_.z > 64 || threads > 1024)
    bad = "bad block shape";
  else if (threads > bounds_) bad = "more threads than the kernel's __launch_bounds__";
  if (bad) {
    std::fprintf(stderr, "emu: launch of %s with grid (%u,%u,%u) block (%u,%u,%u): %s\n", name,
                 grid_.x, grid_.y, grid_.z, block_.x, block_.y, block_.z, bad);
    g_last = cudaErrorInvalidConfiguration;
    return;
  }
  auto lim = g_dyn_limit.find(key);
  const std::size_t dyn_limit =
      lim == g_dyn_limit.end() ? g_device.default_dyn_smem_limit : static_cast<std::size_t>(lim->second);
  if (smem_ > dyn_limit) {
    std::fprintf(stderr,
                 "emu: launch of %s: %zu bytes of dynamic shared memory, above its limit of %zu "
                 "(cudaFuncSetAttribute)\n",
                 name, smem_, dyn_limit);
    g_last = cudaErrorInvalidValue;
    return;
  }
  init_fibers();
  const int n = static_cast<int>(threads);
  g_nthreads = n;
  g_kernel = name;
  g_body = &body;
  gridDim = grid_;
  blockDim = block_;
  g_state.assign(static_cast<std::size_t>(n), kRun);
  g_site.assign(static_cast<std::size_t>(n), Site{"", 0});
  g_mask.assign(static_cast<std::size_t>(n), 0);
  g_gen.assign(static_cast<std::size_t>(n), 0);
  for (auto& s : g_slots) s.assign(static_cast<std::size_t>((n + 31) / 32) * 32 * 8, 0);
  const unsigned long long nblocks = static_cast<unsigned long long>(grid_.x) * grid_.y * grid_.z;
  if (nblocks > (1ull << 26)) fatal("launch of %s: %llu blocks: too many to emulate", name, nblocks);
  std::vector<unsigned> border(static_cast<std::size_t>(nblocks));
  for (unsigned long long i = 0; i < nblocks; ++i) border[i] = static_cast<unsigned>(i);
  if (g_order == Order::reverse) std::reverse(border.begin(), border.end());
  if (g_order == Order::random) std::shuffle(border.begin(), border.end(), g_rng);
  for (unsigned b : border) {
    blockIdx.x = b % grid_.x;
    blockIdx.y = (b / grid_.x) % grid_.y;
    blockIdx.z = b / (grid_.x * grid_.y);
    g_dyn = ::operator new(smem_, std::align_val_t(16));
    std::memset(g_dyn, 0xff, smem_);
    g_dyn_bytes = smem_;
    g_static_bytes = 0;
    run_block();
    ++g_blocks;
    if (g_static_bytes > g_device.static_smem_limit)
      report("kernel %s: %zu bytes of static shared memory (limit %zu)", name, g_static_bytes,
             g_device.static_smem_limit);
    if (g_static_bytes + g_dyn_bytes > g_device.max_smem_optin)
      report("kernel %s: %zu bytes of shared memory in all (limit %zu)", name,
             g_static_bytes + g_dyn_bytes, g_device.max_smem_optin);
    free_block_memory();
  }
  g_body = nullptr;
  g_kernel = "";
}

}  // namespace emu
