// libFuzzer target: a config file's bytes, read as train_gpt and `strata config check` read them
// (config::load_config). Anything but a strata::UserError — a crash, a hang, another exception —
// is a finding. Built by hand with clang (tests/fuzz/README.md).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "framework/config/config.hpp"
#include "framework/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    std::string p = "/tmp/strata-fuzz-config-XXXXXX";
    const int fd = ::mkstemp(p.data());
    if (fd < 0) std::abort();
    ::close(fd);
    return p;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    strata::config::load_config(path, {});
  } catch (const strata::UserError&) {
    // the expected answer to bad input
  }
  return 0;
}
