#!/usr/bin/env python3
"""PyTorch's side of the attention benchmark on one GPU (bench/gpu/README.md): causal
F.scaled_dot_product_attention at a GPT's shape, as nanoGPT calls it (q, k, v split from one
qkv [B, T, 3C] and viewed as [B, NH, T, hs]), forward and backward timed apart, beside
bench_attention_cuda (Strata's kernels) in the same GPU check.

    python3 bench/gpu/pytorch_attention.py [--batch 8] [--seq 1024] [--heads 12] [--embd 768]
        [--dtype bf16|fp16] [--reps 20] [--rounds 5] [--backend flash|default] [--json-out FILE]
        [--device cuda|cpu]

Output: one JSON line on stdout (the median forward and backward times in ms over --rounds
rounds of --reps calls each, the GPU synchronised around each round; tokens/s of one forward and
backward, B T over their sum; TFLOP/s by FlashAttention's count: causal forward 2 B NH T^2 hs,
backward 2.5 times that), one line for people on stderr; --json-out FILE also writes
{"bench": ..., "runs": [...]}. --backend flash (default) asks PyTorch for its FlashAttention
kernel and says which ran ("default" when the request is refused or unavailable).
Exit status: 0 it ran; 1 it failed; 2 bad sizes, no PyTorch, or no GPU (with --device cuda).
"""
import argparse
import json
import statistics
import sys
import time


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", choices=("flash", "default"), default="flash")
    ap.add_argument("--json-out")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    a = ap.parse_args(argv)
    if min(a.batch, a.seq, a.heads, a.reps, a.rounds) < 1 or a.embd % a.heads:
        print("pytorch_attention: sizes must be >= 1 and --embd a multiple of --heads",
              file=sys.stderr)
        return 2
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("pytorch_attention: PyTorch is not installed (pip install torch, or Debian's "
              "python3-torch)", file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_attention: no GPU here (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    dev = torch.device(a.device)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    B, T, NH, C = a.batch, a.seq, a.heads, a.embd
    hs = C // NH
    g = torch.Generator(device="cpu").manual_seed(1234)
    qkv = torch.randn(B, T, 3 * C, generator=g).to(dev, dt).requires_grad_(True)
    dout = torch.randn(B, NH, T, hs, generator=g).to(dev, dt)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def forward():
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (x.view(B, T, NH, hs).transpose(1, 2) for x in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    backend = "default"
    ctx = None
    if a.backend == "flash" and dev.type == "cuda":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION)
            backend = "flash"
        except ImportError:
            ctx = None
    try:
        if ctx is not None:
            ctx.__enter__()
        try:
            out = forward()
        except RuntimeError:  # the flash kernel refused (GPU, dtype, shape): PyTorch's choice
            if ctx is not None:
                ctx.__exit__(None, None, None)
                ctx = None
            backend = "default"
            out = forward()
        torch.autograd.grad(out, (qkv,), dout, retain_graph=True)

        def timed(f):
            ms = []
            for _ in range(a.rounds):
                sync()
                t0 = time.perf_counter()
                for _ in range(a.reps):
                    f()
                sync()
                ms.append((time.perf_counter() - t0) * 1e3 / a.reps)
            return statistics.median(ms)

        def fwd_only():
            with torch.enable_grad():
                forward()

        fwd = timed(fwd_only)
        bwd = timed(lambda: torch.autograd.grad(out, (qkv,), dout, retain_graph=True))
    except Exception as e:  # noqa: BLE001 - reported as the run's error
        rec = {"impl": "pytorch", "mode": "sdpa", "error": f"{type(e).__name__}: {e}"[:300]}
        print(json.dumps(rec))
        return 1
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    fwd_flop = 2.0 * B * NH * T * T * hs
    rec = {
        "impl": "pytorch", "mode": "sdpa", "backend": backend, "dtype": a.dtype,
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__, "tokens_per_s": round(B * T / ((fwd + bwd) * 1e-3), 1),
        "forward_ms": round(fwd, 4), "backward_ms": round(bwd, 4),
        "forward_tflops": round(fwd_flop / (fwd * 1e-3) * 1e-12, 2),
        "backward_tflops": round(2.5 * fwd_flop / (bwd * 1e-3) * 1e-12, 2),
        "config": {"batch": B, "seq": T, "heads": NH, "embd": C, "head_size": hs},
        "reps": a.reps, "rounds": a.rounds,
    }
    print(json.dumps(rec))
    print(f"pytorch sdpa ({backend}, {a.dtype}): forward {fwd:.3f} ms "
          f"({rec['forward_tflops']} TFLOP/s), backward {bwd:.3f} ms "
          f"({rec['backward_tflops']} TFLOP/s)", file=sys.stderr)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"bench": "attention", "runs": [rec]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
