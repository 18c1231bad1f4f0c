// The emulator itself (selftest.cu): that what it runs behaves as CUDA defines it (shuffles,
// ballots, 3-D indices, dynamic shared memory), and that it finds the mistakes it is meant to
// find. A divergent barrier or shuffle aborts the process, so those run in a child process.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tests/cuda_emu/harness.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_TEST_ASAN 1
#endif
#endif
#if defined(CUDA_EMU_TEST_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_emu_selftest {
void shuffles(int* out);
void indices(int* out, dim3 grid, dim3 block);
void racy(float* out);
void unwritten_shared(float* out);
void divergent_barrier(float* out);
void two_barriers(float* out);
void exit_before_barrier(float* out);
void divergent_shuffle(float* out);
void shared_overrun(float* out);
void bounded(float* out, unsigned threads);
void dynamic(float* out, unsigned threads, std::size_t bytes);
cudaError_t allow_dynamic(int bytes);
}  // namespace cuda_emu_selftest

namespace cuda_emu_test {
namespace {

namespace st = cuda_emu_selftest;

// Runs f in a child process: whether it ended abnormally (a signal or a nonzero exit), and what
// it wrote to stderr.
std::pair<bool, std::string> in_child(void (*f)()) {
  std::fflush(stdout);
  std::fflush(stderr);
  int fd[2];
  if (pipe(fd) != 0) return {false, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 2);
#if defined(CUDA_EMU_TEST_ASAN)
    // The report this child may exist to make goes to the stderr read here, even where the run's
    // ASAN_OPTIONS send reports to files (scripts/test --sanitize address: log_path), where it
    // would be missed here and counted there as a finding.
    __sanitizer_set_report_path("stderr");
#endif
    f();
    std::fflush(stderr);
    _exit(0);
  }
  close(fd[1]);
  std::string err;
  char buf[4096];
  for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(r));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {!(WIFEXITED(status) && WEXITSTATUS(status) == 0), err};
}

void expect_child_failure(const char* what, void (*f)(), const char* message,
                          const char* or_message = nullptr) {
  const auto [failed, err] = in_child(f);
  checked();
  const bool said = err.find(message) != std::string::npos ||
                    (or_message && err.find(or_message) != std::string::npos);
  if (!failed || !said)
    fail("%s: expected the child to fail saying \"%s\"; it %s, stderr:\n%s", what, message,
         failed ? "failed" : "succeeded", err.c_str());
}

EMU_TEST("emulator", shuffles_and_ballots) {
  DevBuf d(64 * 5 * 4);
  st::shuffles(d.as<int>());
  expect_ok("shuffles");
  std::vector<int> o(64 * 5);
  d.download(o.data(), o.size() * 4);
  for (int t = 0; t < 64; ++t) {
    const int lane = t & 31, base = t & ~31;
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l)
      if ((base + l) % 3 == 0) ballot |= 1u << l;
    const int want[5] = {base + (lane ^ 5), lane + 3 < 32 ? t + 3 : t, lane >= 2 ? t - 2 : t,
                         base + (lane & ~15) + 7, static_cast<int>(ballot)};
    for (int k = 0; k < 5; ++k) {
      checked();
      if (o[static_cast<std::size_t>(t * 5 + k)] != want[k])
        fail("thread %d, collective %d: %d, expected %d", t, k, o[static_cast<std::size_t>(t * 5 + k)], want[k]);
    }
  }
}

EMU_TEST("emulator", indices_3d) {
  for (auto [grid, block] : {std::pair<dim3, dim3>{dim3(3, 2, 2), dim3(4, 3, 2)},
                             {dim3(1, 1, 1), dim3(33, 1, 1)}, {dim3(2, 3, 1), dim3(8, 8, 4)}}) {
    const std::size_t n = static_cast<std::size_t>(grid.x) * grid.y * grid.z * block.x * block.y * block.z;
    for (emu::Order order : {emu::Order::forward, emu::Order::reverse, emu::Order::random}) {
      emu::set_order(order, 3);
      DevBuf d(n * 4);
      std::vector<int> zero(n, 0), o(n);
      d.upload(zero.data(), n * 4);
      st::indices(d.as<int>(), grid, block);
      expect_ok("indices");
      d.download(o.data(), n * 4);
      const std::size_t per = static_cast<std::size_t>(block.x) * block.y * block.z;
      for (std::size_t i = 0; i < n; ++i) {
        checked();
        if (o[i] != static_cast<int>(1 + i % per)) {
          fail("grid (%u,%u,%u) block (%u,%u,%u): element %zu is %d", grid.x, grid.y, grid.z,
               block.x, block.y, block.z, i, o[i]);
          break;
        }
      }
    }
  }
  emu::set_order(emu::Order::forward);
}

EMU_TEST("emulator", finds_a_missing_barrier) {
  std::vector<unsigned char> first;
  bool differs = false;
  for (emu::Order order : {emu::Order::forward, emu::Order::reverse}) {
    emu::set_order(order);
    DevBuf d(64 * 4);
    st::racy(d.as<float>());
    expect_ok("racy");
    const auto r = d.raw();
    if (first.empty()) first = r;
    else differs = r != first;
  }
  emu::set_order(emu::Order::forward);
  checked();
  if (!differs) fail("a read of another thread's shared element without a barrier went unseen");
}

EMU_TEST("emulator", finds_unwritten_shared_memory) {
  DevBuf d(64 * 4);
  st::unwritten_shared(d.as<float>());
  expect_ok("unwritten_shared");
  const HostArr o = d.download(DT::f32, 64);
  for (int t = 0; t < 64; ++t) {
    checked();
    if ((t < 32) != (o.get(t) == 1.0f) || (t >= 32) != std::isnan(o.get(t)))
      fail("unwritten shared element %d read as %g", t, o.get(t));
  }
}

void child_divergent_barrier() {
  DevBuf d(64 * 4);
  st::divergent_barrier(d.as<float>());
}
void child_two_barriers() {
  DevBuf d(64 * 4);
  st::two_barriers(d.as<float>());
}
void child_exit_before_barrier() {
  DevBuf d(64 * 4);
  st::exit_before_barrier(d.as<float>());
}
void child_divergent_shuffle() {
  DevBuf d(64 * 4);
  st::divergent_shuffle(d.as<float>());
}
#if CUDA_EMU_TEST_ASAN
void child_shared_overrun() {
  DevBuf d(64 * 4);
  st::shared_overrun(d.as<float>());
}
void child_dynamic_overrun() {
  DevBuf d(64 * 4);
  st::dynamic(d.as<float>(), 64, 60 * 4);  // 64 threads, room for 60 floats
}
#endif

EMU_TEST("emulator", finds_divergence) {
  expect_child_failure("divergent barrier", child_divergent_barrier, "have exited");
  expect_child_failure("two barriers", child_two_barriers, "different __syncthreads");
  expect_child_failure("exit before a barrier", child_exit_before_barrier, "have exited");
  expect_child_failure("divergent shuffle", child_divergent_shuffle, "reached by 16 of 32 lanes");
}

EMU_TEST("emulator", finds_a_shared_overrun) {
#if CUDA_EMU_TEST_ASAN
  // UBSan's bounds check sees the static array's index first; AddressSanitizer the byte past the
  // block's allocation.
  expect_child_failure("shared overrun", child_shared_overrun, "heap-buffer-overflow",
                       "out of bounds for type 'float [32]'");
  expect_child_failure("dynamic shared overrun", child_dynamic_overrun, "heap-buffer-overflow");
#else
  std::printf("  note: not built with AddressSanitizer: the shared-memory overrun check is not run\n");
#endif
}

EMU_TEST("emulator", checks_launches_and_pointers) {
  DevBuf d(1024 * 4);
  // Launch bounds.
  st::bounded(d.as<float>(), 128);
  expect_ok("128 threads within __launch_bounds__(128)");
  st::bounded(d.as<float>(), 256);
  checked();
  if (cudaGetLastError() != cudaErrorInvalidConfiguration)
    fail("256 threads past __launch_bounds__(128) launched");
  // Dynamic shared memory: above 48 KB only after opting in.
  st::dynamic(d.as<float>(), 64, 64 * 4);
  expect_ok("dynamic shared memory");
  const HostArr o = d.download(DT::f32, 64);
  for (int t = 0; t < 64; ++t) {
    checked();
    if (o.get(t) != static_cast<float>((t + 1) % 64)) fail("dynamic shared memory: %d read %g", t, o.get(t));
  }
  st::dynamic(d.as<float>(), 64, 60 * 1024);
  checked();
  if (cudaGetLastError() != cudaErrorInvalidValue) fail("60 KB of dynamic shared memory without opting in");
  expect_ok("opt in", st::allow_dynamic(60 * 1024));
  st::dynamic(d.as<float>(), 64, 60 * 1024);
  expect_ok("60 KB after opting in");
  checked();
  if (st::allow_dynamic(300 * 1024) != cudaErrorInvalidValue) fail("300 KB opt-in accepted");
  expect_emu_errors("300 KB opt-in", 1);
  // A host pointer as a kernel argument, and copies whose kind does not match the pointers.
  std::vector<float> host(64);
  st::bounded(host.data(), 64);
  expect_emu_errors("host pointer argument", 1);
  checked();
  if (cudaMemcpy(d.get(), host.data(), 16, cudaMemcpyDeviceToHost) != cudaErrorInvalidValue)
    fail("a device-to-host copy into device memory accepted");
  expect_emu_errors("memcpy of the wrong kind", 1);
  checked();
  if (cudaMemsetAsync(host.data(), 0, 16, nullptr) != cudaErrorInvalidValue)
    fail("cudaMemsetAsync of host memory accepted");
  expect_emu_errors("memset of host memory", 1);
  checked();
  if (cudaMemsetAsync(d.get(), 0, 1024 * 4 + 1, nullptr) != cudaErrorInvalidValue)
    fail("cudaMemsetAsync past an allocation accepted");
  expect_emu_errors("memset past the end", 1);
}

}  // namespace
}  // namespace cuda_emu_test
