// The SIMD flags of this CPU that Strata's kernels dispatch on, as the benchmarks print them beside
// their figures (machines differ: one may have AVX-512, another only AVX2).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace strata::bench {

// "fma f16c avx2 avx512f ..." in /proc/cpuinfo's order; "(no AVX2, no AVX-512)" when none.
inline std::string cpu_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;)
      if (w.rfind("avx512", 0) == 0 || w == "avx2" || w == "fma" || w == "f16c")
        out += (out.empty() ? "" : " ") + w;
    break;
  }
  return out.empty() ? "(no AVX2, no AVX-512)" : out;
}

// The avx512 flags alone ("" when none).
inline std::string avx512_flags() {
  std::istringstream all(cpu_flags());
  std::string out;
  for (std::string w; all >> w;)
    if (w.rfind("avx512", 0) == 0) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace strata::bench
