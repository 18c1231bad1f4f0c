// Run-time choice of the row-kernel instruction set.
#include "framework/backend/cpu/isa.hpp"

#include <atomic>
#include <cstdlib>

#include <fmt/format.h>

#include "framework/core/error.hpp"

namespace strata::cpu::detail {
namespace {

bool cpu_has(const char* isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (std::string(isa) == "avx512")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  if (std::string(isa) == "avx2")
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return std::string(isa) == "generic";
}

const RowKernels* table_for(const std::string& name) {
  const RowKernels* t = nullptr;
  if (name == "avx512") t = row_kernels_avx512();
  if (name == "avx2") t = row_kernels_avx2();
  if (name == "generic") t = row_kernels_generic();
  return t != nullptr && cpu_has(name.c_str()) ? t : nullptr;
}

const RowKernels* best() {
  for (const char* n : {"avx512", "avx2", "generic"}) {
    if (const RowKernels* t = table_for(n)) return t;
  }
  return row_kernels_generic();
}

// The best table, or the one named by STRATA_CPU_ISA (an error if this CPU lacks it).
const RowKernels* initial() {
  const char* env = std::getenv("STRATA_CPU_ISA");
  if (env == nullptr || *env == '\0') return best();
  const RowKernels* t = table_for(env);
  if (t == nullptr) {
    user_fail("cpu", "STRATA_CPU_ISA={} is not available on this CPU/build (available: {})", env,
              fmt::join(available_isas(), ", "));
  }
  return t;
}

std::atomic<const RowKernels*>& active() {
  static std::atomic<const RowKernels*> a{initial()};
  return a;
}

}  // namespace

const RowKernels& row_kernels() {
  return *active().load(std::memory_order_relaxed);
}

std::vector<std::string> available_isas() {
  std::vector<std::string> out;
  for (const char* n : {"avx512", "avx2", "generic"}) {
    if (table_for(n) != nullptr) out.emplace_back(n);
  }
  return out;
}

void force_isa(const std::string& name) {
  if (name.empty()) {
    active().store(best());
    return;
  }
  const RowKernels* t = table_for(name);
  STRATA_CHECK(t != nullptr, "cpu", "instruction set '{}' is not available on this CPU/build",
               name);
  active().store(t);
}

}  // namespace strata::cpu::detail
