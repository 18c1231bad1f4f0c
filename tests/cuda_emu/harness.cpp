// The harness of test_cuda_emu (harness.hpp) and its main: runs the tests of the groups named on
// the command line (all without), prints a summary, returns 1 on any failure, on any error the
// emulator reported, or when a group named has no test.
#include "tests/cuda_emu/harness.hpp"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <set>

namespace cuda_emu_test {
namespace {
int g_failures = 0;
long long g_checks = 0;
long long g_seen_errors = 0;
const char* g_current = "";
}  // namespace

std::vector<TestCase>& registry() {
  static std::vector<TestCase> r;
  return r;
}

void fail(const char* f, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  std::printf("FAIL %s: %s\n", g_current, buf);
  std::fflush(stdout);
  ++g_failures;
}

int failures() { return g_failures; }
void checked(long long n) { g_checks += n; }

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

void expect_ok(const std::string& what, cudaError_t e) {
  checked();
  if (e != cudaSuccess) fail("%s: returned %s", what.c_str(), cudaGetErrorName(e));
  const cudaError_t last = cudaGetLastError();
  if (last != cudaSuccess) fail("%s: cudaGetLastError() = %s", what.c_str(), cudaGetErrorName(last));
  if (emu::error_count() != g_seen_errors) {
    fail("%s: the emulator reported %lld error(s) (above)", what.c_str(),
         emu::error_count() - g_seen_errors);
    g_seen_errors = emu::error_count();
  }
}

void expect_emu_errors(const std::string& what, long long n) {
  checked();
  const long long got = emu::error_count() - g_seen_errors;
  if (got != n) fail("%s: the emulator reported %lld error(s), expected %lld", what.c_str(), got, n);
  g_seen_errors = emu::error_count();
}

const char* name(DT d) { return d == DT::f32 ? "f32" : d == DT::bf16 ? "bf16" : "f16"; }
DType dtype(DT d) { return d == DT::f32 ? DType::f32 : d == DT::bf16 ? DType::bf16 : DType::f16; }
std::size_t size_of(DT d) { return d == DT::f32 ? 4 : 2; }

std::uint32_t HostArr::bits(std::int64_t i) const {
  if (dt == DT::f32) {
    std::uint32_t u;
    std::memcpy(&u, bytes.data() + 4 * i, 4);
    return u;
  }
  std::uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return h;
}

std::vector<float> HostArr::f32() const {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = get(i);
  return v;
}

HostArr random_arr(DT dt, std::int64_t n, std::mt19937& g, float scale) {
  HostArr a(dt, n);
  std::normal_distribution<float> nd(0.0f, scale);
  for (std::int64_t i = 0; i < n; ++i) a.set(i, nd(g));
  return a;
}

HostArr convert_arr(const HostArr& a, DT to) {
  HostArr r(to, a.n);
  for (std::int64_t i = 0; i < a.n; ++i) r.set(i, a.get(i));
  return r;
}

DevBuf::DevBuf(std::size_t bytes) : bytes_(bytes) {
  if (cudaMalloc(&p_, bytes) != cudaSuccess) fail("cudaMalloc(%zu) failed", bytes);
}
DevBuf::DevBuf(const HostArr& a) : DevBuf(a.bytes.size()) { upload(a); }
DevBuf& DevBuf::operator=(DevBuf&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
  }
  return *this;
}
DevBuf::~DevBuf() {
  if (p_) cudaFree(p_);
}
void DevBuf::upload(const void* src, std::size_t n, std::size_t offset) {
  if (n == 0) return;
  if (offset + n > bytes_) fail("upload of %zu bytes at %zu into %zu", n, offset, bytes_);
  expect_ok("upload", cudaMemcpy(static_cast<char*>(p_) + offset, src, n, cudaMemcpyHostToDevice));
}
void DevBuf::download(void* dst, std::size_t n, std::size_t offset) const {
  if (n == 0) return;
  expect_ok("download",
            cudaMemcpy(dst, static_cast<const char*>(p_) + offset, n, cudaMemcpyDeviceToHost));
}
HostArr DevBuf::download(DT dt, std::int64_t n, std::size_t offset) const {
  HostArr a(dt, n);
  download(a.data(), a.bytes.size(), offset);
  return a;
}
std::vector<unsigned char> DevBuf::raw() const {
  std::vector<unsigned char> v(bytes_);
  download(v.data(), bytes_);
  return v;
}

std::vector<unsigned char> run_orders(const std::string& what,
                                      const std::function<std::vector<unsigned char>()>& run,
                                      int orders) {
  emu::set_order(emu::Order::forward);
  const std::vector<unsigned char> first = run();
  const emu::Order others[2] = {emu::Order::random, emu::Order::reverse};
  for (int k = 0; k < orders - 1 && k < 2; ++k) {
    emu::set_order(others[k], 7u + static_cast<unsigned>(k));
    const std::vector<unsigned char> again = run();
    checked();
    if (again != first) {
      std::size_t i = 0;
      while (i < first.size() && i < again.size() && first[i] == again[i]) ++i;
      fail("%s: %s order gives other bits than forward (first difference at byte %zu of %zu)",
           what.c_str(), k == 0 ? "random" : "reverse", i, first.size());
    }
  }
  emu::set_order(emu::Order::forward);
  return first;
}

void append(std::vector<unsigned char>& out, const std::vector<unsigned char>& more) {
  out.insert(out.end(), more.begin(), more.end());
}
void append(std::vector<unsigned char>& out, const void* p, std::size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  out.insert(out.end(), c, c + n);
}
HostArr arr_from(const std::vector<unsigned char>& bytes, std::size_t offset, DT dt, std::int64_t n) {
  HostArr a(dt, n);
  if (offset + a.bytes.size() > bytes.size()) {
    fail("arr_from: %zu + %zu beyond %zu bytes", offset, a.bytes.size(), bytes.size());
    return a;
  }
  std::memcpy(a.data(), bytes.data() + offset, a.bytes.size());
  return a;
}

bool expect_bits(const std::string& what, const HostArr& got, const HostArr& ref, bool nan_any) {
  checked();
  if (got.dt != ref.dt || got.n != ref.n) {
    fail("%s: shapes differ (%s[%lld] vs %s[%lld])", what.c_str(), name(got.dt),
         static_cast<long long>(got.n), name(ref.dt), static_cast<long long>(ref.n));
    return false;
  }
  std::int64_t bad = 0, first = -1;
  for (std::int64_t i = 0; i < got.n; ++i) {
    if (got.bits(i) == ref.bits(i)) continue;
    if (nan_any && std::isnan(got.get(i)) && std::isnan(ref.get(i))) continue;
    if (first < 0) first = i;
    ++bad;
  }
  if (bad) {
    fail("%s: %lld of %lld elements differ from the reference bitwise; first at %lld: got %.9g "
         "(%#x) ref %.9g (%#x)",
         what.c_str(), static_cast<long long>(bad), static_cast<long long>(got.n),
         static_cast<long long>(first), got.get(first), got.bits(first), ref.get(first),
         ref.bits(first));
    return false;
  }
  return true;
}

double ulp(DT dt, double v) {
  const double a = std::fabs(v);
  const int mant = dt == DT::f32 ? 23 : dt == DT::bf16 ? 7 : 10;
  const int emin = dt == DT::f32 ? -126 : dt == DT::bf16 ? -126 : -14;
  int e = a > 0 ? std::ilogb(a) : emin;
  if (e < emin) e = emin;
  return std::ldexp(1.0, e - mant);
}

bool expect_close(const std::string& what, const HostArr& got, const std::vector<double>& ref,
                  double rtol, double atol) {
  std::vector<double> tol(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) tol[i] = rtol * std::fabs(ref[i]) + atol;
  return expect_within(what, got, ref, tol);
}

bool expect_within(const std::string& what, const HostArr& got, const std::vector<double>& ref,
                   const std::vector<double>& tolv) {
  checked();
  if (static_cast<std::int64_t>(ref.size()) != got.n) {
    fail("%s: %lld values, reference has %zu", what.c_str(), static_cast<long long>(got.n),
         ref.size());
    return false;
  }
  std::int64_t bad = 0, worst_i = -1;
  double worst = 0;
  for (std::int64_t i = 0; i < got.n; ++i) {
    const double g = got.get(i), r = ref[static_cast<std::size_t>(i)];
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) && std::isnan(g)) continue;
    } else if (std::isinf(r) || std::isinf(g)) {
      if (g == r) continue;
    } else {
      double tol = tolv[static_cast<std::size_t>(i)];
      if (got.dt != DT::f32) tol += ulp(got.dt, r);
      const double err = std::fabs(g - r);
      if (err <= tol) continue;
      const double q = err / (tol > 0 ? tol : 1e-300);
      ++bad;
      if (worst_i < 0 || q > worst) {
        worst = q;
        worst_i = i;
      }
      continue;
    }
    ++bad;
    if (worst_i < 0 || worst < 1e300) {
      worst = 1e300;
      worst_i = i;
    }
  }
  if (bad) {
    fail("%s: %lld of %lld elements off; worst at %lld: got %.9g ref %.9g (err/tol %.3g)",
         what.c_str(), static_cast<long long>(bad), static_cast<long long>(got.n),
         static_cast<long long>(worst_i), got.get(worst_i), ref[static_cast<std::size_t>(worst_i)],
         worst);
    return false;
  }
  return true;
}

bool expect_close(const std::string& what, double got, double ref, double rtol, double atol) {
  checked();
  if (std::isnan(got) && std::isnan(ref)) return true;
  if (got == ref) return true;
  if (std::fabs(got - ref) <= rtol * std::fabs(ref) + atol) return true;
  fail("%s: got %.17g ref %.17g (rel err %.3g)", what.c_str(), got, ref,
       std::fabs(got - ref) / std::fabs(ref));
  return false;
}

}  // namespace cuda_emu_test

int main(int argc, char** argv) {
  using namespace cuda_emu_test;
  std::set<std::string> groups;
  for (const TestCase& t : registry()) groups.insert(t.group);
  std::set<std::string> want;
  for (int i = 1; i < argc; ++i) {
    if (!groups.count(argv[i])) {
      std::printf("no test group `%s` (groups:", argv[i]);
      for (const std::string& g : groups) std::printf(" %s", g.c_str());
      std::printf(")\n");
      return 1;
    }
    want.insert(argv[i]);
  }
  int ran = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const TestCase& t : registry()) {
    if (!want.empty() && !want.count(t.group)) continue;
    g_current = t.name;
    const int before = failures();
    const auto a = std::chrono::steady_clock::now();
    t.fn();
    expect_ok(std::string(t.name) + " (end)");
    if (emu::live_device_allocations() != 0)
      fail("%zu device allocations left after the test", emu::live_device_allocations());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    std::printf("%s %s/%s (%.2f s)\n", failures() == before ? "ok  " : "FAIL", t.group, t.name, s);
    std::fflush(stdout);
    ++ran;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d tests, %lld checks, %d failures; %lld launches, %lld blocks, %lld barriers "
              "emulated in %.1f s\n",
              ran, g_checks, failures(), emu::launches(), emu::blocks_run(), emu::barriers(), s);
  if (ran == 0) {
    std::printf("no test ran\n");
    return 1;
  }
  // Errors the emulator reported that no test expected (expect_emu_errors) fail the run.
  expect_ok("end of the run");
  return failures() == 0 ? 0 : 1;
}
