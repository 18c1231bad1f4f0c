// libFuzzer target: a damaged checkpoint. A valid two-rank checkpoint is written once; each input
// replaces either its manifest (first byte even) or rank 0's file (odd) with the rest of the
// input, and the checkpoint is then verified (checksums read) and read back. A CheckpointError or
// UserError is the expected answer; a crash, a hang or another exception is a finding. Built by
// hand with clang (tests/fuzz/README.md).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/save.hpp"
#include "framework/checkpoint/verify.hpp"
#include "framework/core/error.hpp"

namespace ck = strata::checkpoint;

namespace {

// Writes a small two-rank checkpoint (one parameter and its moments) under a temporary root.
std::string make_checkpoint() {
  std::string root = "/tmp/strata-fuzz-ckpt-XXXXXX";
  if (!::mkdtemp(root.data())) std::abort();
  static std::vector<float> data(64);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.25f;
  ck::ManifestHeader h;
  h.step = 1;
  h.layout = ck::WorldLayout{2, 2, 1, 1};
  h.state.optimizer = "adamw";
  for (int r = 1; r >= 0; --r) {
    std::vector<ck::SliceRef> slices;
    for (const char* kind : {"param", "exp_avg", "exp_avg_sq"})
      slices.push_back(ck::SliceRef{kind, "w", strata::Shape{8, 8}, strata::DType::f32, r * 32,
                                    r * 32 + 32, data.data() + r * 32});
    ck::save_checkpoint(ck::SaveSpec{root, r, h, {}}, slices, ck::RankState{},
                        ck::single_process_ok);
  }
  return root + "/step_00000001";
}

std::string read_all(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string s;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

void write_all(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = make_checkpoint();
  static const std::string manifest = read_all(dir + "/manifest.json");
  static const std::string rank0 = read_all(dir + "/rank_00000.h5");
  if (size < 1) return 0;
  const bool replace_manifest = data[0] % 2 == 0;
  const std::string target = dir + (replace_manifest ? "/manifest.json" : "/rank_00000.h5");
  write_all(target, data + 1, size - 1);
  try {
    ck::verify_checkpoint(dir, ck::VerifyLevel::full);
    ck::CheckpointReader r(dir);
    r.read_f32("param", "w");
    r.read_f32("exp_avg", "w");
  } catch (const strata::UserError&) {
    // CheckpointError is one: the expected answer to a damaged checkpoint
  }
  const std::string& original = replace_manifest ? manifest : rank0;
  write_all(target, reinterpret_cast<const std::uint8_t*>(original.data()), original.size());
  return 0;
}
