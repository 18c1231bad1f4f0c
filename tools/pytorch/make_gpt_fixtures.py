#!/usr/bin/env python3
"""Writes tests/fixtures/gpt_tiny.fx: the PyTorch reference Strata's C++ GPT must reproduce.

Run with Debian's PyTorch:  /usr/bin/python3 tools/pytorch/make_gpt_fixtures.py [--out PATH]
Deterministic: fixed seeds, float32, one thread. The file format is described in fixture_io.py and
tests/support/fixture.hpp (little-endian: "STRATAFX", u32 version=1, u32 count, then per entry
u32 name_len, name, u32 dtype (0=f32,1=i32,2=f64), u32 rank, rank x u64 dims, data).

Entries (P = every parameter name in named_parameters() order, e.g. "transformer.wte.weight",
"transformer.h.0.attn.c_attn.weight" [3C, C] (nn.Linear layout [out, in]); the tied lm_head weight
appears once, as transformer.wte.weight):
  config/{vocab_size,block_size,n_layer,n_head,n_embd,batch,seq}   i32 scalars
  adamw/{lr,beta1,beta2,eps,weight_decay,clip_norm}                 f64 scalars; steps: i32 scalar
  <P>                      initial values (GPT-2 init, then LN params and biases perturbed)
  idx, targets             [B,T] i32 batch 1 (no ignored targets)
  act/embed                [B,T,C] wte(idx)+wpe(pos) for batch 1
  act/h.<i>                [B,T,C] output of block i, batch 1
  act/ln_f                 [B,T,C] output of ln_f, batch 1
  logits                   [B,T,V] f32, batch 1
  loss                     f32 scalar, mean cross-entropy, batch 1
  grad/<P>                 gradients of loss (batch 1) at the initial values; the tied weight's
                           gradient is the sum of its embedding and lm_head uses
  batch2/idx, batch2/targets   [B,T] i32 batch 2, some targets are -1 (ignore_index)
  batch2/logits, batch2/loss, batch2/grad/<P>   same for batch 2 (mean over non-ignored targets)
  adamw_losses             [10] f32: loss on batch 1 BEFORE each of 10 AdamW steps
  final/<P>                parameters after those 10 steps
  adamw_clip_losses        [10] f32: same run with clip_grad_norm_(1.0) before each step
  adamw_clip_grad_norms    [10] f32: total grad norm (pre-clip) returned by clip_grad_norm_
  final_clip/<P>           parameters after the 10 clipped steps
AdamW: torch.optim.AdamW(lr=1e-3, betas=(0.9,0.95), eps=1e-8), weight_decay=0.1 only on params with
dim >= 2 (weights and embeddings), 0 on biases and LayerNorm params; every step uses batch 1.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_io import read_fixture, write_fixture  # noqa: E402
from gpt_model import GPT, GPTConfig  # noqa: E402

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32)
B, T = 4, 16
LR, BETAS, EPS, WD, CLIP, STEPS = 1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0, 10


def f32(t):
    return t.detach().cpu().to(torch.float32).numpy().copy()


def i32(t):
    return t.detach().cpu().to(torch.int32).numpy().copy()


def build_model():
    torch.manual_seed(1337)
    model = GPT(CFG)
    # Perturb LayerNorm params and biases so their gradients are non-trivial.
    g = torch.Generator().manual_seed(4242)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                if name.endswith(".weight"):
                    p.add_(0.1 * torch.randn(p.shape, generator=g))
                else:
                    p.add_(0.05 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.add_(0.02 * torch.randn(p.shape, generator=g))
    return model


def make_batches():
    g = torch.Generator().manual_seed(7)
    seq1 = torch.randint(0, CFG.vocab_size, (B, T + 1), generator=g)
    seq2 = torch.randint(0, CFG.vocab_size, (B, T + 1), generator=g)
    idx1, tgt1 = seq1[:, :T].contiguous(), seq1[:, 1:].contiguous()
    idx2, tgt2 = seq2[:, :T].contiguous(), seq2[:, 1:].contiguous()
    # A few ignored positions: a padded tail in row 1, scattered ones in rows 0 and 3.
    tgt2[1, T - 4:] = -1
    tgt2[0, 3] = -1
    tgt2[3, 0] = -1
    tgt2[3, 9] = -1
    return (idx1, tgt1), (idx2, tgt2)


def activations(model, idx):
    tr = model.transformer
    pos = torch.arange(idx.shape[1])
    out = []
    with torch.no_grad():
        x = tr.wte(idx) + tr.wpe(pos)
        out.append(("act/embed", f32(x)))
        for i, block in enumerate(tr.h):
            x = block(x)
            out.append((f"act/h.{i}", f32(x)))
        out.append(("act/ln_f", f32(tr.ln_f(x))))
    return out


def forward_backward(model, idx, tgt):
    model.zero_grad(set_to_none=True)
    logits, loss = model(idx, tgt)
    loss.backward()
    grads = [(n, f32(p.grad)) for n, p in model.named_parameters()]
    return f32(logits), f32(loss), grads


def train(model, idx, tgt, clip):
    opt = model.configure_optimizer(LR, BETAS, EPS, WD)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = model(idx, tgt)
        losses.append(loss.item())
        loss.backward()
        if clip:
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP).item())
        opt.step()
    return np.array(losses, np.float32), np.array(norms, np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "fixtures", "gpt_tiny.fx"))
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    model = build_model()
    init_state = copy.deepcopy(model.state_dict())
    (idx1, tgt1), (idx2, tgt2) = make_batches()
    params = list(model.named_parameters())

    e = []
    for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
        e.append((f"config/{k}", np.array(getattr(CFG, k), np.int32)))
    e += [("config/batch", np.array(B, np.int32)), ("config/seq", np.array(T, np.int32))]
    for k, v in (("lr", LR), ("beta1", BETAS[0]), ("beta2", BETAS[1]), ("eps", EPS),
                 ("weight_decay", WD), ("clip_norm", CLIP)):
        e.append((f"adamw/{k}", np.array(v, np.float64)))
    e.append(("adamw/steps", np.array(STEPS, np.int32)))
    e += [(n, f32(p)) for n, p in params]

    e += [("idx", i32(idx1)), ("targets", i32(tgt1))]
    e += activations(model, idx1)
    logits, loss, grads = forward_backward(model, idx1, tgt1)
    e += [("logits", logits), ("loss", loss)] + [(f"grad/{n}", g) for n, g in grads]

    e += [("batch2/idx", i32(idx2)), ("batch2/targets", i32(tgt2))]
    logits2, loss2, grads2 = forward_backward(model, idx2, tgt2)
    e += [("batch2/logits", logits2), ("batch2/loss", loss2)]
    e += [(f"batch2/grad/{n}", g) for n, g in grads2]

    model.load_state_dict(init_state)
    losses, _ = train(model, idx1, tgt1, clip=False)
    e.append(("adamw_losses", losses))
    e += [(f"final/{n}", f32(p)) for n, p in model.named_parameters()]

    model.load_state_dict(init_state)
    clip_losses, norms = train(model, idx1, tgt1, clip=True)
    e += [("adamw_clip_losses", clip_losses), ("adamw_clip_grad_norms", norms)]
    e += [(f"final_clip/{n}", f32(p)) for n, p in model.named_parameters()]

    out = os.path.normpath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    write_fixture(out, e)
    back = read_fixture(out)  # self-check: the file reads back identically
    assert list(back) == [n for n, _ in e]
    for n, a in e:
        assert back[n].shape == a.shape and np.array_equal(back[n], a), n
    print(f"wrote {out}: {len(e)} entries, {os.path.getsize(out)} bytes; torch {torch.__version__}")
    print(f"loss {float(loss):.6f}  batch2/loss {float(loss2):.6f}")
    print("adamw_losses      ", " ".join(f"{x:.4f}" for x in losses))
    print("adamw_clip_losses ", " ".join(f"{x:.4f}" for x in clip_losses))
    print("adamw_clip_norms  ", " ".join(f"{x:.4f}" for x in norms))


if __name__ == "__main__":
    main()
