// Token + position embedding on CUDA.
//   token check:  one grid-stride pass; each out-of-range position lowers a device word by an
//                 integer atomicMin (the first bad position, the same every run); the host copies
//                 it back (this synchronises the stream).
//   forward:      one block per row r (grid-stride over rows), threads over the C channels:
//                 out[r, c] = wte[k, c] + wpe[r % T, c] in f32, rounded once (k outside the slice
//                 or no wpe: that term is 0, exactly as the CPU).
//   dwpe:         one thread per (t, c): the B rows b*T + t in b order.
//   dwte:         keys[r] = the row of position r (vocab_rows for a token of another slice),
//                 values = r; a stable CUB radix sort by key groups the positions of each row in
//                 position order; then one block per sorted position that starts a run of equal
//                 keys (other blocks return at once), one thread per channel, sums the run's
//                 dout rows in order and adds into dwte.
// No float atomics anywhere: every sum has a fixed order (the CPU's: f32 results match it
// bitwise).
#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/embedding.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;

unsigned grid(std::int64_t n) { return grid_for(n, kThreads); }

// Blocks for a one-block-per-item kernel over n items (it strides over the rest).
unsigned item_blocks(std::int64_t n) {
  return static_cast<unsigned>(n < 1 ? 1 : (n > (1LL << 30) ? (1LL << 30) : n));
}

__global__ void check_tokens_kernel(const std::int32_t* tokens, std::int64_t n, std::int64_t hi,
                                    unsigned long long* first_bad) {
  STRATA_GRID_STRIDE(i, n) {
    const std::int64_t t = tokens[i];
    if (t < 0 || t >= hi) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

__global__ void embedding_forward_kernel(const std::int32_t* tokens, const void* wte, DT wdt,
                                         std::int64_t vocab_start, std::int64_t vocab_rows,
                                         const void* wpe, DT pdt, void* out, DT odt,
                                         std::int64_t N, std::int64_t T, int C) {
  for (std::int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const std::int64_t k = static_cast<std::int64_t>(tokens[r]) - vocab_start;
    const bool in_slice = k >= 0 && k < vocab_rows;
    const std::int64_t e = k * C, p = (r % T) * C, o = r * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float a = in_slice ? load(wte, wdt, e + c) : 0.0f;
      const float b = wpe ? load(wpe, pdt, p + c) : 0.0f;
      store(out, odt, o + c, __fadd_rn(a, b));
    }
  }
}

// Element i = t * C + c of dwpe's first T rows; dout[b*T + t, c] is element b * T * C + i.
__global__ void embedding_dwpe_kernel(const void* dout, DT ddt, void* dwpe, DT pdt,
                                      std::int64_t B, std::int64_t TC) {
  STRATA_GRID_STRIDE(i, TC) {
    const float old = load(dwpe, pdt, i);
    float acc = pdt == DT::f32 ? old : 0.0f;  // f32: in place, as the CPU; 16-bit: as Acc32
    for (std::int64_t b = 0; b < B; ++b) acc = __fadd_rn(acc, load(dout, ddt, b * TC + i));
    store(dwpe, pdt, i, pdt == DT::f32 ? acc : __fadd_rn(old, acc));
  }
}

// keys[r] = tokens[r] - vocab_start when in [0, vocab_rows), else vocab_rows; values[r] = r.
__global__ void dwte_keys_kernel(const std::int32_t* tokens, std::int64_t n,
                                 std::int64_t vocab_start, std::int64_t vocab_rows,
                                 std::uint32_t* keys, std::int32_t* values) {
  STRATA_GRID_STRIDE(i, n) {
    const std::int64_t k = static_cast<std::int64_t>(tokens[i]) - vocab_start;
    keys[i] = static_cast<std::uint32_t>(k >= 0 && k < vocab_rows ? k : vocab_rows);
    values[i] = static_cast<std::int32_t>(i);
  }
}

// Block x: sorted position i (grid-stride); block y: a tile of blockDim.x channels (y-stride).
// A block whose i starts a run of equal keys below vocab_rows sums the run's dout rows, in sorted
// (= position) order, into dwte's row. The loops over i and over j depend on the block only.
__global__ void dwte_accumulate_kernel(const std::uint32_t* keys, const std::int32_t* positions,
                                       std::int64_t n, std::uint32_t vocab_rows, const void* dout,
                                       DT ddt, void* dwte, DT edt, int C) {
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::uint32_t k = keys[i];
    if (k >= vocab_rows) continue;              // another slice's tokens (sorted last)
    if (i > 0 && keys[i - 1] == k) continue;  // inside a run: its first position's block sums it
    const std::int64_t row = static_cast<std::int64_t>(k) * C;
    for (std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < C;
         c += static_cast<std::int64_t>(gridDim.y) * blockDim.x) {
      const float old = load(dwte, edt, row + c);
      float acc = edt == DT::f32 ? old : 0.0f;  // f32: in place, as the CPU; 16-bit: as Acc32
      for (std::int64_t j = i; j < n && keys[j] == k; ++j)
        acc = __fadd_rn(acc, load(dout, ddt, static_cast<std::int64_t>(positions[j]) * C + c));
      store(dwte, edt, row + c, edt == DT::f32 ? acc : __fadd_rn(old, acc));
    }
  }
}

// Bits the sort looks at: enough for every key in [0, vocab_rows] (the sentinel included).
int key_bits(std::int64_t vocab_rows) { return embedding_key_bits(vocab_rows); }

// The scratch: keys in/out (u32), values in/out (i32), each n long and 256-byte aligned, then
// CUB's temporary storage.
struct DwteLayout {
  std::size_t array = 0;  // bytes of each of the four arrays (aligned)
  std::size_t cub = 0;    // CUB's temporary storage
  std::size_t total() const { return 4 * array + cub; }  // embedding_dwte_scratch_total
};

cudaError_t dwte_layout(std::int64_t n, std::int64_t vocab_rows, DwteLayout* l, cudaStream_t s) {
  l->array = embedding_dwte_array_bytes(n);
  l->cub = 0;
  return cub::DeviceRadixSort::SortPairs(
      nullptr, l->cub, static_cast<const std::uint32_t*>(nullptr),
      static_cast<std::uint32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
      static_cast<std::int32_t*>(nullptr), static_cast<int>(n), 0, key_bits(vocab_rows), s);
}

}  // namespace

cudaError_t find_bad_token(const std::int32_t* tokens, std::int64_t n, std::int64_t hi,
                           unsigned long long* flag, std::int64_t* bad_index,
                           std::int32_t* bad_value, cudaStream_t s) {
  *bad_index = -1;
  *bad_value = 0;
  if (n <= 0) return cudaSuccess;
  cudaError_t e = cudaMemsetAsync(flag, 0xff, sizeof(unsigned long long), s);  // ULLONG_MAX
  if (e != cudaSuccess) return e;
  check_tokens_kernel<<<grid(n), kThreads, 0, s>>>(tokens, n, hi, flag);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  unsigned long long first = 0;
  if ((e = cudaMemcpyAsync(&first, flag, sizeof first, cudaMemcpyDeviceToHost, s)) != cudaSuccess)
    return e;
  if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return e;
  if (first == ULLONG_MAX) return cudaSuccess;
  std::int32_t v = 0;
  if ((e = cudaMemcpyAsync(&v, tokens + first, sizeof v, cudaMemcpyDeviceToHost, s)) !=
      cudaSuccess)
    return e;
  if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return e;
  *bad_index = static_cast<std::int64_t>(first);
  *bad_value = v;
  return cudaSuccess;
}

void launch_embedding_forward(const std::int32_t* tokens, const void* wte, DT wdt,
                              std::int64_t vocab_start, std::int64_t vocab_rows, const void* wpe,
                              DT pdt, void* out, DT odt, std::int64_t N, std::int64_t T, int C,
                              cudaStream_t s) {
  if (N <= 0 || T <= 0 || C <= 0) return;
  embedding_forward_kernel<<<item_blocks(N), kThreads, 0, s>>>(
      tokens, wte, wdt, vocab_start, vocab_rows, wpe, pdt, out, odt, N, T, C);
}

void launch_embedding_backward_dwpe(const void* dout, DT ddt, void* dwpe, DT pdt, std::int64_t B,
                                    std::int64_t T, int C, cudaStream_t s) {
  const std::int64_t TC = T * C;
  if (B <= 0 || TC <= 0) return;
  embedding_dwpe_kernel<<<grid(TC), kThreads, 0, s>>>(dout, ddt, dwpe, pdt, B, TC);
}

cudaError_t embedding_dwte_scratch_bytes(std::int64_t n, std::int64_t vocab_rows,
                                         std::size_t* bytes, cudaStream_t s) {
  *bytes = 0;
  if (n <= 0 || vocab_rows <= 0) return cudaSuccess;
  if (n > INT_MAX || vocab_rows > INT_MAX) return cudaErrorInvalidValue;
  DwteLayout l;
  const cudaError_t e = dwte_layout(n, vocab_rows, &l, s);
  if (e == cudaSuccess) *bytes = l.total();
  return e;
}

cudaError_t launch_embedding_backward_dwte(const std::int32_t* tokens, std::int64_t n,
                                           std::int64_t vocab_start, std::int64_t vocab_rows,
                                           const void* dout, DT ddt, void* dwte, DT edt, int C,
                                           void* scratch, std::size_t scratch_bytes,
                                           cudaStream_t s) {
  if (n <= 0 || vocab_rows <= 0 || C <= 0) return cudaSuccess;
  if (n > INT_MAX || vocab_rows > INT_MAX) return cudaErrorInvalidValue;
  DwteLayout l;
  cudaError_t e = dwte_layout(n, vocab_rows, &l, s);
  if (e != cudaSuccess) return e;
  if (scratch == nullptr || scratch_bytes < l.total()) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<std::uint32_t*>(base);
  auto* keys_out = reinterpret_cast<std::uint32_t*>(base + l.array);
  auto* pos_in = reinterpret_cast<std::int32_t*>(base + 2 * l.array);
  auto* pos_out = reinterpret_cast<std::int32_t*>(base + 3 * l.array);
  void* cub_temp = base + 4 * l.array;

  dwte_keys_kernel<<<grid(n), kThreads, 0, s>>>(tokens, n, vocab_start, vocab_rows, keys_in,
                                                 pos_in);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  // Stable: positions of equal keys keep their (ascending) input order.
  std::size_t cub_bytes = l.cub;
  e = cub::DeviceRadixSort::SortPairs(cub_temp, cub_bytes, keys_in, keys_out, pos_in, pos_out,
                                      static_cast<int>(n), 0, key_bits(vocab_rows), s);
  if (e != cudaSuccess) return e;
  const std::int64_t tiles = (static_cast<std::int64_t>(C) + kThreads - 1) / kThreads;
  const dim3 blocks(item_blocks(n), static_cast<unsigned>(tiles > 65535 ? 65535 : tiles));
  dwte_accumulate_kernel<<<blocks, kThreads, 0, s>>>(keys_out, pos_out, n,
                                                     static_cast<std::uint32_t>(vocab_rows), dout,
                                                     ddt, dwte, edt, C);
  return cudaGetLastError();
}

}  // namespace strata::cuda_ops
