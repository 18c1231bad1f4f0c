#!/usr/bin/env python3
"""PyTorch side of the CPU GPT benchmark: trains nanoGPT's GPT-2 (tools/pytorch/gpt_model.py) with AdamW
on seeded random tokens and prints ONE JSON line that the C++ side is compared against.

  /usr/bin/python3 bench/gpt_cpu/gpt_torch.py --n-layer 4 --n-embd 256 --n-head 4 --seq 256 --batch 8 \
      --vocab 256 --steps 10 --warmup 2 --threads 2

A step is zero_grad + forward + backward (+ optional clipping) + AdamW step on a fresh random batch.
step_ms is the MEDIAN wall time of the timed steps (those after --warmup); tokens_per_s = batch*seq /
step_ms. Run with Debian's python3 (python3-torch); a pyenv python3 has no torch.

Activation memory (peak_activation_bytes_per_token) is measured on one extra, untimed step with
torch.autograd.graph.saved_tensors_hooks: every tensor autograd saves for backward passes through the pack
hook; we sum the bytes of the UNIQUE storages behind them (keyed by storage data_ptr, so views such as
q/k/v splits or transposes are counted once), leaving out storages of parameters and buffers (weights
saved by linear layers, the causal mask), which are not activations. This is the memory a forward pass
keeps alive until backward (the graph's saved activations), excluding logits/loss outputs that are not
saved and transient workspaces. It is exact and independent of the allocator, unlike RSS. As a cross-check
rss_peak_delta_bytes_per_token reports (peak RSS during a fwd+bwd minus RSS once params, grads and
optimizer state exist) / tokens, via /proc/self/clear_refs (VmHWM reset); it is null where unsupported
and includes allocator slack, gradients of activations and temporaries, so it is larger.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "pytorch"))
from gpt_model import GPT, GPTConfig  # noqa: E402


def rss_bytes(field):
    """VmRSS / VmHWM of this process in bytes, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss():
    try:  # first hand freed heap back to the OS so the baseline RSS is not inflated by cached frees
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def train_step(model, opt, idx, tgt, clip):
    opt.zero_grad(set_to_none=True)
    _, loss = model(idx, tgt)
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss


def saved_activation_bytes(model, idx, tgt):
    """Bytes of unique non-parameter storages autograd saves during one forward (see module doc)."""
    excluded = {t.storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    seen = {}

    def pack(t):
        s = t.storage()
        ptr = s.data_ptr()
        if ptr not in excluded and s.nbytes() > 0:
            seen[ptr] = max(seen.get(ptr, 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _, loss = model(idx, tgt)
    total = sum(seen.values())
    loss.backward()  # consume the graph (gradients are discarded by the next zero_grad)
    return total


def main():
    ap = argparse.ArgumentParser(description="PyTorch GPT training throughput on CPU (one JSON line)")
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clip", type=float, default=0.0, help="clip_grad_norm_ max norm (0 = off)")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    cfg = GPTConfig(vocab_size=args.vocab, block_size=args.seq, n_layer=args.n_layer,
                    n_head=args.n_head, n_embd=args.n_embd)
    model = GPT(cfg)
    opt = model.configure_optimizer(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    n_params = sum(p.numel() for p in model.parameters())
    B, T = args.batch, args.seq
    tokens = B * T

    gen = torch.Generator().manual_seed(args.seed + 1)
    n_batches = args.warmup + args.steps + 1
    data = torch.randint(0, args.vocab, (n_batches, B, T + 1), generator=gen)
    batch = lambda i: (data[i, :, :T].contiguous(), data[i, :, 1:].contiguous())  # noqa: E731

    losses = []
    for i in range(args.warmup):
        losses.append(train_step(model, opt, *batch(i), args.clip).item())
    times = []
    for i in range(args.warmup, args.warmup + args.steps):
        t0 = time.perf_counter()
        loss = train_step(model, opt, *batch(i), args.clip)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())

    # Memory, untimed: params, grads and AdamW state all exist now.
    idx, tgt = batch(n_batches - 1)
    act_bytes = saved_activation_bytes(model, idx, tgt)
    opt.zero_grad(set_to_none=False)  # keep grad buffers allocated so they are in the baseline
    rss_delta = None
    if reset_peak_rss() and rss_bytes("VmRSS") is not None:
        base = rss_bytes("VmRSS")
        _, loss = model(idx, tgt)
        loss.backward()
        peak = rss_bytes("VmHWM")
        if peak is not None:
            rss_delta = max(0, peak - base) / tokens

    step_s = statistics.median(times)
    print(json.dumps({
        "impl": "pytorch",
        "tokens_per_s": round(tokens / step_s, 1),
        "step_ms": round(step_s * 1e3, 3),
        "step_ms_min": round(min(times) * 1e3, 3),
        "peak_activation_bytes_per_token": round(act_bytes / tokens, 1),
        "rss_peak_delta_bytes_per_token": None if rss_delta is None else round(rss_delta, 1),
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "config": {"n_layer": args.n_layer, "n_embd": args.n_embd, "n_head": args.n_head, "seq": T,
                   "batch": B, "vocab": args.vocab, "clip": args.clip},
        "params": n_params,
        "steps": args.steps,
        "warmup": args.warmup,
        "loss_first": round(losses[0], 5),
        "loss_last": round(losses[-1], 5),
    }))


if __name__ == "__main__":
    main()
