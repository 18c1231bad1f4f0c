// A stand-in for CUB's DeviceRadixSort::SortPairs on the emulator: the same interface and
// temporary-storage protocol (a call with d_temp_storage == nullptr only sets
// temp_storage_bytes; a call with storage checks that it is large enough), then a stable sort on
// the host by the key bits [begin_bit, end_bit), as CUB's LSD radix sort orders them. The
// temporary storage is overwritten with garbage (CUB uses it), and every buffer is checked to be
// device memory of the right size; the inputs must not overlap the outputs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  // What the stand-in asks for: room for a copy of keys and values plus a fixed part, like CUB's
  // (which needs a double buffer and per-block histograms).
  template <typename KeyT, typename ValueT>
  static std::size_t emu_temp_bytes(long long n) {
    return 1280 + static_cast<std::size_t>(n) * (sizeof(KeyT) + sizeof(ValueT));
  }

  template <typename KeyT, typename ValueT, typename NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, std::size_t& temp_storage_bytes,
                               const KeyT* d_keys_in, KeyT* d_keys_out, const ValueT* d_values_in,
                               ValueT* d_values_out, NumItemsT num_items, int begin_bit = 0,
                               int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_unsigned_v<KeyT>, "the stand-in sorts unsigned keys only");
    static_cast<void>(stream);
    const long long n = static_cast<long long>(num_items);
    if (n < 0 || begin_bit < 0 || end_bit > static_cast<int>(sizeof(KeyT) * 8) ||
        begin_bit > end_bit) {
      emu::report("cub::DeviceRadixSort::SortPairs: bad arguments (n %lld, bits [%d, %d))", n,
                  begin_bit, end_bit);
      return cudaErrorInvalidValue;
    }
    const std::size_t need = emu_temp_bytes<KeyT, ValueT>(n);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = need;
      return cudaSuccess;
    }
    const bool check = emu::pointer_checks();
    if (temp_storage_bytes < need || (check && !emu::is_device(d_temp_storage, temp_storage_bytes))) {
      emu::report("cub::DeviceRadixSort::SortPairs: temporary storage %p of %zu bytes (needs %zu "
                  "bytes of device memory)",
                  d_temp_storage, temp_storage_bytes, need);
      return cudaErrorInvalidValue;
    }
    if (n == 0) return cudaSuccess;
    const std::size_t kb = static_cast<std::size_t>(n) * sizeof(KeyT);
    const std::size_t vb = static_cast<std::size_t>(n) * sizeof(ValueT);
    const void* ranges[5] = {d_keys_in, d_keys_out, d_values_in, d_values_out, d_temp_storage};
    const std::size_t sizes[5] = {kb, kb, vb, vb, temp_storage_bytes};
    for (int i = 0; i < 4; ++i)
      if (check && !emu::is_device(ranges[i], sizes[i])) {
        emu::report("cub::DeviceRadixSort::SortPairs: buffer %d (%p, %zu bytes) is not device "
                    "memory",
                    i, ranges[i], sizes[i]);
        return cudaErrorInvalidValue;
      }
    for (int i = 0; i < 5; ++i)
      for (int j = i + 1; j < 5; ++j) {
        const auto a = reinterpret_cast<std::uintptr_t>(ranges[i]);
        const auto b = reinterpret_cast<std::uintptr_t>(ranges[j]);
        if (a < b + sizes[j] && b < a + sizes[i]) {
          emu::report("cub::DeviceRadixSort::SortPairs: buffers %d and %d overlap", i, j);
          return cudaErrorInvalidValue;
        }
      }
    const int bits = end_bit - begin_bit;
    const auto digit = [&](KeyT k) -> unsigned long long {
      const unsigned long long v = static_cast<unsigned long long>(k) >> begin_bit;
      return bits >= 64 ? v : (v & ((1ull << bits) - 1ull));
    };
    std::vector<KeyT> keys(d_keys_in, d_keys_in + n);
    std::vector<ValueT> values(d_values_in, d_values_in + n);
    std::vector<std::size_t> idx(static_cast<std::size_t>(n));
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t x, std::size_t y) { return digit(keys[x]) < digit(keys[y]); });
    std::memset(d_temp_storage, 0xcd, temp_storage_bytes);  // CUB's scratch use
    for (long long i = 0; i < n; ++i) {
      d_keys_out[i] = keys[idx[static_cast<std::size_t>(i)]];
      d_values_out[i] = values[idx[static_cast<std::size_t>(i)]];
    }
    return cudaSuccess;
  }
};

}  // namespace cub
