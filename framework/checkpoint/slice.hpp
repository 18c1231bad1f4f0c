// SliceRef: the unit of checkpoint storage — a flat element range [begin, end) of one named
// parameter's value or optimizer state, seen row-major over the parameter's global shape.
// ZeRO gives each rank a contiguous range of a unit's flat buffer, which may start or end inside
// a parameter; each parameter's part of that range becomes one slice.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <string_view>

#include "framework/core/dtype.hpp"
#include "framework/core/shape.hpp"

namespace strata::checkpoint {

// What a slice holds. Any lower-case identifier is accepted; these are the ones Strata writes.
inline constexpr std::string_view kParam = "param";          // fp32 master if any, else the weights
inline constexpr std::string_view kExpAvg = "exp_avg";       // AdamW first moment m
inline constexpr std::string_view kExpAvgSq = "exp_avg_sq";  // AdamW second moment v
inline constexpr std::string_view kMomentum = "momentum";    // SGD momentum buffer
// AdamW8bit: m and v as u8 codes (optim/quantize.hpp's dynamic codes, one per element of the
// parameter), and their f32 absmax per quantization block, on a state entry (below) named after
// the unit's first parameter: blocks are cut from the unit's flat buffer, not per parameter.
inline constexpr std::string_view kExpAvgQ8 = "exp_avg_q8";
inline constexpr std::string_view kExpAvgSqQ8 = "exp_avg_sq_q8";
inline constexpr std::string_view kExpAvgAbsmax = "exp_avg_absmax";
inline constexpr std::string_view kExpAvgSqAbsmax = "exp_avg_sq_absmax";
// Adafactor: a matrix's row / column second-moment statistics, on state entries; its vectors'
// second moments are kExpAvgSq and its first moment (beta1) kExpAvg, per element as for AdamW.
inline constexpr std::string_view kExpAvgSqRow = "exp_avg_sq_row";
inline constexpr std::string_view kExpAvgSqCol = "exp_avg_sq_col";
// 1-bit Adam: one rank's worker then server compression errors of a parameter, on the state entry
// "<param>#errors_<rank>_of_<ranks>" (each rank's own; they exist for that rank count only).
inline constexpr std::string_view kCompressionErrors = "compression_errors";
// 1-bit LAMB: the fresh second moment (per element, as exp_avg_sq), and each parameter's scalars
// (coeff_freeze, last_factor, scaling: optim::OneBitLambScalars) on the state entry
// "<param>#onebit_lamb". Its errors are those of one fused tensor of every parameter, on the first
// parameter's errors entry.
inline constexpr std::string_view kExpAvgSqFresh = "exp_avg_sq_fresh";
inline constexpr std::string_view kOneBitLambScalars = "onebit_lamb_scalars";

// Optimizer state that is not one value per parameter element lives in "state entries":
// datasets named "<owner>#<what>" (a parameter name, '#', a word) with a global shape of their
// own and no "param" kind. '#' never occurs in a parameter name.
inline constexpr char kStateEntrySeparator = '#';
std::string state_entry_name(std::string_view owner, std::string_view what);
bool is_state_entry(std::string_view name);

struct SliceRef {
  std::string kind;    // kParam, kExpAvg, ...
  std::string name;    // global parameter name ("transformer.h.0.attn.c_attn.weight")
  Shape global_shape;  // the whole parameter's shape
  DType dtype = DType::f32;
  std::int64_t begin = 0, end = 0;  // flat range within the parameter, begin < end <= numel
  const void* data = nullptr;       // end - begin contiguous elements of dtype (host memory)
  // CRC-32 of the data when the caller already computed it (staging does, while copying); the
  // writer then trusts it instead of reading the data once more.
  std::optional<std::uint32_t> checksum = std::nullopt;
  // 0: the slice is the flat range [begin, end). Otherwise an N-dimensional hyperslab of a
  // parameter split along one dimension (a tensor-parallel part): rows of `run` elements, `stride`
  // apart in the whole parameter, the first at `begin`; end - begin is still its element count.
  std::int64_t run = 0, stride = 0;
};

// Where a slice's elements lie in the whole (flattened) parameter: element i of a strided slice
// (run > 0) is at begin + (i / run)·stride + i % run; of a flat one at begin + i.
struct SliceLayout {
  std::int64_t begin = 0, end = 0, run = 0, stride = 0;
  std::int64_t numel() const { return end - begin; }
  bool strided() const { return run > 0; }
  // One past the whole parameter's index of the last element.
  std::int64_t extent_end() const;
  // "" when the layout is well formed and lies within [0, numel), else what is wrong.
  std::string error(std::int64_t numel) const;
  // The run holding whole-parameter element pos: {offset in the slice's data, elements to the
  // end of that run}; {-1, 0} when the slice does not hold pos.
  std::pair<std::int64_t, std::int64_t> locate(std::int64_t pos) const;
  // Calls f(whole-parameter begin, count) for each run, in order.
  template <typename F>
  void for_each_run(F&& f) const {
    if (!strided()) {
      if (end > begin) f(begin, end - begin);
      return;
    }
    for (std::int64_t i = 0; i < numel(); i += run) f(begin + (i / run) * stride, run);
  }
  // "[b, e)" or "[b, e) in rows of r every s".
  std::string str() const;
};
inline SliceLayout layout_of(const SliceRef& s) { return {s.begin, s.end, s.run, s.stride}; }

// Throws strata::Error unless the kind and name are usable as HDF5 names and the range lies within
// the shape. `where` prefixes the message.
void validate_slice(const SliceRef& s, const std::string& where);
// Kind: [a-z0-9_]+ except "state". Name: non-empty, no '/', not "." or "..", no control characters.
bool valid_kind(std::string_view kind);
bool valid_param_name(std::string_view name);

}  // namespace strata::checkpoint
