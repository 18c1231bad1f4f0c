// Run-time choice of the row-kernel instruction set (AVX-512, AVX2 or portable), made once from
// the CPU's features; tests and benchmarks can force another one.
#pragma once

#include <string>
#include <vector>

#include "framework/backend/cpu/row_kernels.hpp"

namespace strata::cpu::detail {

// The active table: the best the CPU supports, or the one named by the STRATA_CPU_ISA environment
// variable ("avx512", "avx2", "generic"), unless force_isa() chose another.
const RowKernels& row_kernels();

// Instruction sets compiled in AND supported by this CPU, best first ("avx512", "avx2", "generic").
std::vector<std::string> available_isas();

// Makes `name` the active table ("" = the best available); throws if it is not available.
// Not thread-safe against kernels running at the same time.
void force_isa(const std::string& name);

}  // namespace strata::cpu::detail
