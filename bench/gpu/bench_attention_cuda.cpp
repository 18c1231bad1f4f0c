// Causal self-attention alone on one GPU: Strata's ops::attention_forward and attention_backward
// (the tensor-core kernels for bf16/fp16) at a GPT's shape, beside PyTorch's
// scaled_dot_product_attention (FlashAttention) timed by pytorch_attention.py on the same GPU; the
// GPU check reports the ratio. Prints one JSON line: the median forward and backward times, the
// tokens/s of one forward and backward (B T over their sum) and TFLOP/s by FlashAttention's count
// (causal forward 2 B NH T^2 hs, backward 2.5 times that).
//
//   bench_attention_cuda [--batch 8 --seq 1024 --heads 12 --embd 768 --dtype bf16|fp16]
//                        [--reps 20 --rounds 5 --rounded-attention]
//
// --rounded-attention: strata.allow_rounded_attention (P and dS rounded to 16 bits once, as
// FlashAttention does). Layout as GPT's: qkv [B, T, 3C], out and dout [B, T, C] of the same
// dtype, lse f32, dqkv [B, T, 3C].
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <vector>

#include "bench/common/stats.hpp"
#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/math_mode.hpp"
#include "framework/backend/ops/ops.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/rng.hpp"
#include "framework/core/tensor.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

// A device tensor of N(0, 1) values (the stream keyed by `name`), drawn on the host in f32 and
// rounded to dtype.
Tensor random_on(const Device& gpu, const Shape& shape, DType dtype, std::string_view name) {
  Tensor h = Tensor::empty(shape, DType::f32);
  normal_fill(h.data<float>(), static_cast<std::size_t>(h.numel()), 1234, name, 0, 0.0f, 1.0f);
  Tensor d = Tensor::empty(shape, dtype, TensorOptions{gpu, Tier::device, Category::activations});
  d.copy_from(h.to(dtype, TensorOptions{}));
  return d;
}

// The median over `rounds` of the mean time of `reps` calls of f (ms), the stream drained around
// each round.
template <class F>
double time_ms(const Stream& s, int rounds, int reps, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    s.synchronize();
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) f();
    s.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / reps);
  }
  return bench::median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Strata causal attention on one GPU (one JSON line)"};
  int B = 8, T = 1024, NH = 12, C = 768, reps = 20, rounds = 5;
  std::string dtype = "bf16";
  bool rounded = false;
  app.add_option("--batch", B, "sequences");
  app.add_option("--seq", T, "sequence length");
  app.add_option("--heads", NH, "heads");
  app.add_option("--embd", C, "width C (head size C / heads)");
  app.add_option("--dtype", dtype, "bf16 | fp16")->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--reps", reps, "calls per timed round");
  app.add_option("--rounds", rounds, "timed rounds (the median is reported)");
  app.add_flag("--rounded-attention", rounded,
               "strata.allow_rounded_attention: P and dS rounded to 16 bits once");
  CLI11_PARSE(app, argc, argv);
  if (B < 1 || T < 1 || NH < 1 || C % NH != 0 || reps < 1 || rounds < 1) {
    std::fprintf(stderr,
                 "bench_attention_cuda: --batch, --seq, --heads, --reps and --rounds must be >= 1 "
                 "and --embd a multiple of --heads\n");
    return 2;
  }
  if (!cuda::compiled() || cuda::device_count() == 0) {
    std::fprintf(stderr, "bench_attention_cuda: no GPU here (%s)\n",
                 cuda::describe_devices().c_str());
    return 2;
  }
  try {
    const Device gpu = Device::cuda(0);
    const DType dt = dtype == "bf16" ? DType::bf16 : DType::f16;
    const TensorOptions on{gpu, Tier::device, Category::activations};
    const Tensor qkv = random_on(gpu, Shape{B, T, 3 * C}, dt, "qkv");
    const Tensor dout = random_on(gpu, Shape{B, T, C}, dt, "dout");
    const Tensor out = Tensor::empty(Shape{B, T, C}, dt, on);
    const Tensor lse = Tensor::empty(Shape{static_cast<std::int64_t>(B) * NH * T}, DType::f32, on);
    const Tensor dqkv = Tensor::empty(Shape{B, T, 3 * C}, dt, on);
    const MathModeGuard mode(allow_tf32(), rounded);
    const Stream s = current_stream(gpu);

    // One untimed call of each (kernel attributes, the allocator's first blocks), then the timing.
    ops::attention_forward(qkv, out, lse, NH);
    ops::attention_backward(qkv, out, lse, dout, dqkv, NH);
    const double fwd = time_ms(s, rounds, reps, [&] { ops::attention_forward(qkv, out, lse, NH); });
    const double bwd = time_ms(s, rounds, reps, [&] {
      ops::attention_backward(qkv, out, lse, dout, dqkv, NH);
    });
    const double hs = static_cast<double>(C) / NH;
    const double fwd_flop = 2.0 * B * NH * static_cast<double>(T) * T * hs;
    const double tokens = static_cast<double>(B) * T;
    std::printf("%s\n",
                fmt::format("{{\"impl\": \"strata\", \"mode\": \"{}\", \"gpu\": \"{}\", "
                            "\"dtype\": \"{}\", \"rounded_attention\": {}, "
                            "\"tokens_per_s\": {:.1f}, "
                            "\"forward_ms\": {:.4f}, \"backward_ms\": {:.4f}, "
                            "\"forward_tflops\": {:.2f}, \"backward_tflops\": {:.2f}, \"config\": "
                            "{{\"batch\": {}, \"seq\": {}, \"heads\": {}, \"embd\": {}, "
                            "\"head_size\": {}}}, \"reps\": {}, \"rounds\": {}}}",
                            rounded ? "rounded" : "split", cuda::describe_devices(), dtype,
                            rounded, tokens / ((fwd + bwd) * 1e-3), fwd, bwd,
                            fwd_flop / (fwd * 1e-3) * 1e-12, 2.5 * fwd_flop / (bwd * 1e-3) * 1e-12,
                            B, T, NH, C, C / NH, reps, rounds)
                    .c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention_cuda: %s\n", e.what());
    return 1;
  }
}
