// Token + position embedding on CUDA tensors (embedding.cu has the kernels): wte, wpe, out, dout,
// dwte and dwpe each in its own float dtype, computed in f32; out rounded once; dwte and dwpe
// accumulated (16-bit: the f32 sum of the old value and the positions' total, rounded once, as
// the CPU's Acc32; f32: each position added in turn, as the CPU).
//
// Tokens are validated as the CPU table's check_tokens does, with the same message, by a small
// kernel whose result is copied back to the host: this SYNCHRONISES the stream (cuda::host_waits
// counts it). The GPT and its pipeline stages check their tokens on the host before the batch goes
// up and pass ops::TokenCheck::done_by_caller, so a training step has no such wait; a direct call
// with the default still gets the CPU's error at once.
#include <algorithm>
#include <climits>

#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/embedding.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda_runtime.hpp"

namespace strata::cuda_ops {
namespace {

// Every token in [0, V) for a whole table (vocab_start < 0), >= 0 for a vocabulary-parallel
// slice: else "[ops] {op}: token {t} at position {i} is outside the vocabulary [0, {V})", the
// CPU's message.
void check_tokens(const char* op, const Tensor& tokens, std::int64_t V, std::int64_t vocab_start,
                  cudaStream_t s) {
  const std::int64_t hi = vocab_start < 0 ? V : static_cast<std::int64_t>(INT_MAX) + 1;
  Tensor flag = workspace(tokens, Shape{1}, DType::i64);
  std::int64_t index = -1;
  std::int32_t value = 0;
  cuda::note_host_wait();  // find_bad_token waits for the stream to read its flag
  check_cuda(find_bad_token(static_cast<const std::int32_t*>(tokens.raw()), tokens.numel(), hi,
                            static_cast<unsigned long long*>(flag.raw()), &index, &value, s),
             op);
  if (index >= 0)
    fail("ops", "{}: token {} at position {} is outside the vocabulary [0, {})", op, value, index,
         V);
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       const Tensor& out, std::int64_t vocab_start, ops::TokenCheck check) {
  const char* op = "embedding_forward";
  const cudaStream_t s = stream_of(tokens);
  const std::int64_t T = tokens.dim(1), N = tokens.numel(), V = wte.dim(0), C = wte.dim(1);
  if (check == ops::TokenCheck::in_op) check_tokens(op, tokens, V, vocab_start, s);
  STRATA_CHECK(C <= INT_MAX, "cuda", "{}: width {} is too large", op, C);
  launch_embedding_forward(static_cast<const std::int32_t*>(tokens.raw()), wte.raw(), dt(wte),
                           std::max<std::int64_t>(vocab_start, 0), V,
                           wpe.defined() ? wpe.raw() : nullptr,
                           wpe.defined() ? dt(wpe) : DT::f32, out.raw(), dt(out), N, T,
                           static_cast<int>(C), s);
  check_launch(op);
}

void embedding_backward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                        const Tensor& dwpe, std::int64_t vocab_start, ops::TokenCheck check) {
  const char* op = "embedding_backward";
  const cudaStream_t s = stream_of(tokens);
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), N = tokens.numel(), C = dout.dim(1);
  if (dwte.defined() && check == ops::TokenCheck::in_op)
    check_tokens(op, tokens, dwte.dim(0), vocab_start, s);
  STRATA_CHECK(C <= INT_MAX, "cuda", "{}: width {} is too large", op, C);
  if (dwpe.defined()) {
    launch_embedding_backward_dwpe(dout.raw(), dt(dout), dwpe.raw(), dt(dwpe), B, T,
                                   static_cast<int>(C), s);
    check_launch(op);
  }
  if (dwte.defined() && N > 0 && C > 0 && dwte.dim(0) > 0) {
    STRATA_CHECK(N <= INT_MAX && dwte.dim(0) <= INT_MAX, "cuda",
                 "{}: {} positions over {} rows: more than the sort handles", op, N, dwte.dim(0));
    std::size_t bytes = 0;
    check_cuda(embedding_dwte_scratch_bytes(N, dwte.dim(0), &bytes, s), op);
    // Keys, positions and CUB's temporary storage: released when this returns (the allocator is
    // stream-ordered: the kernels queued before that still see it).
    Tensor scratch = workspace(dout, Shape{static_cast<std::int64_t>(bytes)}, DType::u8);
    check_cuda(launch_embedding_backward_dwte(static_cast<const std::int32_t*>(tokens.raw()), N,
                                              std::max<std::int64_t>(vocab_start, 0), dwte.dim(0),
                                              dout.raw(), dt(dout), dwte.raw(), dt(dwte),
                                              static_cast<int>(C), scratch.raw(), bytes, s),
               op);
  }
}

}  // namespace strata::cuda_ops
