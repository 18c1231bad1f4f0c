#!/usr/bin/env python3
"""PyTorch's side of the GPT-2 training benchmark on one GPU (bench/gpu/README.md).

A nanoGPT-style GPT-2 trained on random tokens: bf16 autocast, causal attention through
F.scaled_dot_product_attention(is_causal=True), GELU (tanh), weight-tied head, fused AdamW
(torch.optim.AdamW(fused=True): decay on 2-D weights only, lr 6e-4, betas 0.9/0.95, weight decay
0.1), gradient clipping at 1.0. The vocabulary of 50257 is padded to 50304 (a multiple of 64) as
nanoGPT and llm.c do; the tokens are drawn from the 50257 real ids. Each mode (eager,
compile = torch.compile) trains a fresh model from the same seed: --warmup steps, then --steps
timed steps, each CUDA-synchronised; step time is their median.

    python3 bench/gpu/pytorch_gpt2.py [--model 124M|350M|tiny] [--batch B] [--seq T]
        [--steps N] [--warmup N] [--modes eager,compile] [--json-out FILE] [--device cuda|cpu]
        [--peak-flops F] [--flops-formula palm|llmc] [--seed S]

Output: one JSON line per mode on stdout (tokens/s, MFU, step time, peak memory, ...), one
human line per mode on stderr; --json-out FILE also writes {"bench": ..., "runs": [...]}.
MFU = tokens/s x FLOPs per token / peak bf16 dense FLOP/s. FLOPs per token, --flops-formula:
  palm (default): 6N + 12·L·C·T, N without the position table (PaLM appendix B, as nanoGPT's
                  estimate_mfu and bench_gpt_cuda count)
  llmc:           6N + 6·L·C·T, N every parameter (llm.c's gpt2_estimate_mfu: causal attention
                  counted half)
N counts the tied embedding once, with its padded rows; L layers, C width, T sequence length.
Peak FLOP/s: a table
by GPU name (H100 SXM and H200 989.5e12, H100 PCIe 756e12, A100 312e12, T4 65e12), or
--peak-flops; none on the CPU unless given (MFU is then null).
Exit status: 0 every mode ran with finite losses; 1 a mode failed; 2 no GPU (with --device cuda).
"""
import argparse
import gc
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("pytorch_gpt2: PyTorch is not installed (pip install torch, or Debian's python3-torch)",
          file=sys.stderr)
    sys.exit(2)

MODELS = {  # n_layer, n_head, n_embd, vocab (real), padded vocab, default batch, default seq
    "124M": (12, 12, 768, 50257, 50304, 8, 1024),
    "350M": (24, 16, 1024, 50257, 50304, 4, 1024),
    "tiny": (2, 2, 64, 500, 512, 4, 64),
}
PEAKS = [  # (substrings that must all be in the device name, bf16 dense FLOP/s, label)
    (("GH200",), 989.5e12, "GH200 (table)"),
    (("H200",), 989.5e12, "H200 (table)"),
    (("H100", "PCIe"), 756e12, "H100 PCIe (table)"),
    (("H100", "NVL"), 835e12, "H100 NVL (table)"),
    (("H100",), 989.5e12, "H100 SXM (table)"),
    (("A100",), 312e12, "A100 (table)"),
    (("T4",), 65e12, "T4 (table)"),
]
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class CausalSelfAttention(nn.Module):
    def __init__(self, n_head, n_embd, seq):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        if not HAS_SDPA:  # PyTorch < 2.0: the same attention written out
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq, dtype=torch.bool)),
                                 persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_head, n_embd, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_head, n_embd, seq)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, vocab_padded, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab_padded, n_embd)
        self.wpe = nn.Embedding(seq, n_embd)
        self.h = nn.ModuleList(Block(n_head, n_embd, seq) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_padded, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def peak_flops(device, override):
    if override:
        return override, "--peak-flops"
    if device.type != "cuda":
        return None, "none on the CPU (give --peak-flops)"
    name = torch.cuda.get_device_name(device)
    for keys, flops, label in PEAKS:
        if all(k in name for k in keys):
            return flops, label
    return None, f"unknown GPU {name!r} (give --peak-flops)"


def make_optimizer(model, device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    if device.type == "cuda":
        return torch.optim.AdamW(groups, fused=True, **kw), "AdamW (fused)"
    return torch.optim.AdamW(groups, **kw), "AdamW (default implementation: CPU)"


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_mode(mode, a, device, shape):
    n_layer, n_head, n_embd, vocab, vocab_padded = shape
    torch.manual_seed(a.seed)
    model = GPT(n_layer, n_head, n_embd, vocab_padded, a.seq).to(device)
    n_params = sum(p.numel() for p in model.parameters())  # the tied weight once
    opt, opt_name = make_optimizer(model, device)
    step_model = model
    if mode == "compile":
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch.compile needs PyTorch 2.0 or newer (this is "
                               f"{torch.__version__})")
        step_model = torch.compile(model)
    elif mode != "eager":
        raise RuntimeError(f"unknown mode {mode!r} (eager, compile)")
    g = torch.Generator().manual_seed(a.seed + 1)
    n_batches = min(a.warmup + a.steps, 8)
    data = torch.randint(0, vocab, (n_batches, a.batch, a.seq + 1), generator=g)
    batches = [(d[:, :-1].contiguous().to(device), d[:, 1:].contiguous().to(device))
               for d in data]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, losses = [], []
    for i in range(a.warmup + a.steps):
        x, y = batches[i % n_batches]
        sync(device)
        t = time.perf_counter()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
    timed = times[a.warmup:]
    med = statistics.median(timed)
    tokens = a.batch * a.seq
    L, C, T = n_layer, n_embd, a.seq
    if a.flops_formula == "palm":   # N without the position table (it does no matmul)
        fpt = 6 * (n_params - a.seq * n_embd) + 12 * L * C * T
    else:                           # llm.c: every parameter
        fpt = 6 * n_params + 6 * L * C * T
    peak, peak_src = peak_flops(device, a.peak_flops)
    tps = tokens / med
    rec = {
        "bench": "pytorch_gpt2", "impl": "pytorch", "mode": mode, "model": a.model,
        "n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "vocab_size": vocab,
        "padded_vocab_size": vocab_padded, "batch": a.batch, "seq": a.seq,
        "tokens_per_step": tokens, "n_params": n_params, "warmup": a.warmup, "steps": a.steps,
        "step_ms": med * 1e3, "step_ms_min": min(timed) * 1e3,
        "step_ms_max": max(timed) * 1e3, "first_step_s": times[0], "tokens_per_s": tps,
        "flops_per_token": fpt,
        "flops_formula": "6N+12LCT (PaLM/nanoGPT)" if a.flops_formula == "palm"
        else "6N+6LCT (llm.c)",
        "peak_flops": peak, "peak_flops_source": peak_src,
        "mfu": tps * fpt / peak if peak else None,
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device)
        if device.type == "cuda" else None,
        "loss_first": losses[0], "loss_last": losses[-1],
        "loss_finite": all(math.isfinite(v) for v in losses),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "attention": "sdpa" if HAS_SDPA else "manual (no SDPA in this PyTorch)",
        "optimizer": opt_name, "grad_clip": a.grad_clip, "dtype": "bf16 autocast",
        "seed": a.seed,
    }
    del step_model, model, opt, batches
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def human(rec):
    if "error" in rec:
        return f"pytorch_gpt2 {rec['mode']}: FAILED: {rec['error']}"
    mem = (f", peak {rec['peak_memory_bytes'] / 2**30:.2f} GiB"
           if rec["peak_memory_bytes"] is not None else "")
    mfu = f", MFU {rec['mfu'] * 100:.1f}%" if rec["mfu"] is not None else ""
    return (f"pytorch_gpt2 {rec['mode']} {rec['model']} B{rec['batch']} T{rec['seq']} on "
            f"{rec['device']}: {rec['step_ms']:.1f} ms/step (median of {rec['steps']}), "
            f"{rec['tokens_per_s']:,.0f} tokens/s{mfu}{mem}; first step {rec['first_step_s']:.1f}"
            f" s; loss {rec['loss_first']:.3f} -> {rec['loss_last']:.3f}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="124M")
    ap.add_argument("--batch", type=int, help="micro-batch (default 8 for 124M, 4 for 350M)")
    ap.add_argument("--seq", type=int, help="sequence length T (default 1024; tiny 64)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    ap.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    ap.add_argument("--json-out", metavar="FILE", help="also write every run to FILE")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--peak-flops", type=float, help="peak FLOP/s for MFU (default: a table)")
    ap.add_argument("--flops-formula", choices=("palm", "llmc"), default="palm")
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0 disables")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args(argv)
    n_layer, n_head, n_embd, vocab, vocab_padded, batch, seq = MODELS[a.model]
    a.batch = a.batch or batch
    a.seq = a.seq or seq
    if a.steps < 1 or a.warmup < 0 or a.batch < 1 or a.seq < 1:
        ap.error("--steps, --batch and --seq must be at least 1, --warmup at least 0")
    device = torch.device(a.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print("pytorch_gpt2: no usable GPU (torch.cuda.is_available() is False); "
                  "--device cpu runs on the CPU", file=sys.stderr)
            return 2
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    runs, ok = [], True
    for mode in [m.strip() for m in a.modes.split(",") if m.strip()]:
        try:
            rec = run_mode(mode, a, device, (n_layer, n_head, n_embd, vocab, vocab_padded))
            if not rec["loss_finite"]:
                rec["error"] = "a loss was not finite"
        except Exception as e:  # a mode that fails is reported, and the others still run
            rec = {"bench": "pytorch_gpt2", "impl": "pytorch", "mode": mode, "model": a.model,
                   "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            if device.type == "cuda":
                torch.cuda.empty_cache()
        ok = ok and "error" not in rec
        runs.append(rec)
        print(json.dumps(rec), flush=True)
        print(human(rec), file=sys.stderr, flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"bench": "pytorch_gpt2", "runs": runs}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
