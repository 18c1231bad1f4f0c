// Test helpers for checkpoints: temporary directories, a small model of named parameters with
// deterministic values, writing it from any number of "ranks" with uneven flat ranges, and
// corrupting files on purpose.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/checkpoint/flat_range.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/save.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "strata-ckpt-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A small "model": parameters in one flat unit, with sizes that do not divide evenly.
inline std::vector<FlatParam> toy_params() {
  std::vector<FlatParam> p = {{"transformer.wte.weight", Shape{7, 5}, 0},
                              {"transformer.h.0.ln_1.bias", Shape{5}, 0},
                              {"transformer.h.0.attn.c_attn.weight", Shape{15, 5}, 0},
                              {"transformer.ln_f.weight", Shape{5}, 0}};
  std::int64_t off = 0;
  for (auto& x : p) {
    x.offset = off;
    off += x.shape.numel();
  }
  return p;
}

inline std::int64_t total_numel(const std::vector<FlatParam>& p) {
  std::int64_t n = 0;
  for (const auto& x : p) n += x.shape.numel();
  return n;
}

// Deterministic, distinct values per kind and flat position (exact in bf16 for small ints/8).
inline float value_at(const std::string& kind, std::int64_t flat) {
  const float k = kind == "param" ? 0.0f : kind == "exp_avg" ? 1000.0f : 2000.0f;
  return k + static_cast<float>(flat) * 0.125f - 3.0f;
}

inline std::vector<float> flat_values(const std::string& kind, std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value_at(kind, i);
  return v;
}

// Uneven split of [0, n) into `parts` contiguous ranges whose boundaries fall inside parameters
// (odd cuts late, even cuts early), as a ZeRO partition of a padded unit might.
inline std::vector<std::pair<std::int64_t, std::int64_t>> uneven_ranges(std::int64_t n, int parts) {
  std::vector<std::int64_t> cuts{0};
  for (int i = 1; i < parts; ++i) {
    const std::int64_t c = n * i / parts + (i % 2 ? 7 : -4);
    cuts.push_back(std::clamp(c, cuts.back(), n));
  }
  cuts.push_back(n);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (int i = 0; i < parts; ++i) out.push_back({cuts[i], cuts[i + 1]});
  return out;
}

// Saves the toy model from `world` ranks (sequentially, one process) with each rank holding its
// uneven flat range of param, exp_avg and exp_avg_sq (f32). Returns the step directory.
inline std::string save_toy(const std::string& root, std::int64_t step, int world,
                            DType param_dtype = DType::f32, RetentionPolicy retention = {}) {
  const auto params = toy_params();
  const std::int64_t n = total_numel(params);
  const auto ranges = uneven_ranges(n, world);
  std::vector<float> p32 = flat_values("param", n), m = flat_values("exp_avg", n),
                     v = flat_values("exp_avg_sq", n);
  std::vector<std::uint16_t> p16(static_cast<std::size_t>(n));
  if (param_dtype != DType::f32)
    convert(p32.data(), DType::f32, p16.data(), param_dtype, p16.size());
  ManifestHeader h;
  h.step = step;
  h.layout = WorldLayout{world, world, 1, 1};
  h.zero_stage = 1;
  h.config = {{"strata", {{"model", {{"n_layer", 1}, {"n_head", 1}}}}}};
  h.state.optimizer = "adamw";
  h.state.optimizer_updates = step;
  h.state.scheduler_steps = step;
  h.state.loss_scaler = LossScalerRecord{true, 32768.0, step, step - 7, 2};
  h.state.sampler = SamplerRecord{static_cast<std::uint64_t>(step) * 16, 0};
  // Phase callbacks of a sequential "job": each rank runs alone, so rank 0 commits last.
  for (int r = world - 1; r >= 0; --r) {
    const auto [lo, hi] = ranges[static_cast<std::size_t>(r)];
    std::vector<SliceRef> slices;
    const void* pdata = param_dtype == DType::f32 ? static_cast<const void*>(p32.data() + lo)
                                                  : static_cast<const void*>(p16.data() + lo);
    for (auto& s : slices_for_flat_range(params, lo, hi, kParam, pdata, param_dtype))
      slices.push_back(s);
    for (auto& s : slices_for_flat_range(params, lo, hi, kExpAvg, m.data() + lo, DType::f32))
      slices.push_back(s);
    for (auto& s : slices_for_flat_range(params, lo, hi, kExpAvgSq, v.data() + lo, DType::f32))
      slices.push_back(s);
    RankState rs;
    rs.rngs["dropout"] = RngRecord{1234, static_cast<std::uint64_t>(step * 100 + r)};
    SaveSpec spec{root, r, h, retention};
    save_checkpoint(spec, slices, rs, single_process_ok);
  }
  return join_path(root, step_dir_name(step));
}

// File offset of a contiguous dataset's first data byte.
inline std::uint64_t dataset_offset(const std::string& file, const std::string& dataset) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  if (off == HADDR_UNDEF) throw std::runtime_error("no offset for " + dataset);
  return off;
}

// Flips one byte of a file in place.
inline void flip_byte(const std::string& file, std::uint64_t offset) {
  std::fstream fs(file, std::ios::in | std::ios::out | std::ios::binary);
  fs.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  fs.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  fs.seekp(static_cast<std::streamoff>(offset));
  fs.write(&c, 1);
}

// Expects f() to throw an exception of type E whose message contains every fragment.
template <typename E = std::exception>
::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       const std::vector<std::string>& fragments) {
  try {
    f();
  } catch (const std::exception& e) {
    if constexpr (!std::is_same_v<E, std::exception>) {  // (any exception is a std::exception)
      if (dynamic_cast<const E*>(&e) == nullptr)
        return ::testing::AssertionFailure() << "wrong exception type: " << e.what();
    }
    const std::string what = e.what();
    for (const auto& frag : fragments)
      if (what.find(frag) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks «" << frag << "»: " << what;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "nothing was thrown";
}

}  // namespace strata::checkpoint::testing
