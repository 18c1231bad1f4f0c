#!/usr/bin/env python3
"""Writes tests/fixtures/hf_gpt2_tiny/: a tiny Hugging Face GPT-2 and its logits, which
`strata ckpt import` / `export` and Strata's forward pass must reproduce; and checks a Strata
export with GPT2LMHeadModel.from_pretrained.

Made once, with Debian's PyTorch and PyPI's transformers/safetensors in a virtual environment:

    python3 -m venv --system-site-packages /tmp/hf && \\
      /tmp/hf/bin/pip install "transformers==4.44.2" "tokenizers<0.20" "safetensors<0.5"
    /tmp/hf/bin/python tools/pytorch/make_hf_gpt2_fixture.py            # writes the fixture
    /tmp/hf/bin/python tools/pytorch/make_hf_gpt2_fixture.py --check-export DIR
        # DIR from `strata ckpt export CKPT -o DIR`: loads it with from_pretrained (no missing or
        # unexpected keys allowed) and compares its logits with the fixture's

Files (the C++ tests read them without Python):
  model.safetensors, config.json   GPT2LMHeadModel.save_pretrained (F32, "transformer." names,
                                   Conv1D weights [in, out], no lm_head: tied)
  bf16/model.safetensors, bf16/config.json   the same weights rounded to BF16 (safetensors'
                                   save_file), for the 16-bit import/export round trip
  expected.fx                      tokens [B, T] i32 and logits [B, T, V] f32 of the F32 model in
                                   eval mode (format: tools/pytorch/fixture_io.py)
Model: n_layer 2, n_head 4, n_embd 32, vocab 64, n_positions 16; HF's init (seed 1234), then
LayerNorm parameters and biases perturbed so they are not ones/zeros.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_io import read_fixture, write_fixture  # noqa: E402

CFG = dict(n_layer=2, n_head=4, n_embd=32, vocab_size=64, n_positions=16)
B, T = 2, 16


def build_model():
    torch.manual_seed(1234)
    model = GPT2LMHeadModel(GPT2Config(**CFG))
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name:
                p.add_((0.1 if name.endswith(".weight") else 0.05) * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.add_(0.02 * torch.randn(p.shape, generator=g))
    return model.eval()


def tokens():
    g = torch.Generator().manual_seed(7)
    return torch.randint(0, CFG["vocab_size"], (B, T), generator=g)


def write(out):
    torch.set_num_threads(1)
    model = build_model()
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)  # not needed by from_pretrained
    idx = tokens()
    with torch.no_grad():
        logits = model(idx).logits
    write_fixture(os.path.join(out, "expected.fx"),
                  [("tokens", idx.to(torch.int32).numpy()), ("logits", logits.float().numpy())])

    bf = os.path.join(out, "bf16")
    os.makedirs(bf, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).contiguous()
          for k, v in model.state_dict().items() if k != "lm_head.weight" and not k.endswith(".attn.bias")
          and not k.endswith(".attn.masked_bias")}
    save_file(sd, os.path.join(bf, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    cfg["torch_dtype"] = "bfloat16"
    with open(os.path.join(bf, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    sizes = {n: os.path.getsize(os.path.join(out, n)) for n in ("model.safetensors", "expected.fx")}
    import transformers, safetensors  # noqa: E401
    print(f"wrote {out}: {sizes}; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"safetensors {safetensors.__version__}")


def check_export(export_dir, fixture):
    """A Strata export must load with from_pretrained and give the fixture's logits."""
    model, info = GPT2LMHeadModel.from_pretrained(export_dir, output_loading_info=True)
    model.eval()
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise SystemExit(f"from_pretrained({export_dir}) reported {bad}")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        raise SystemExit("lm_head is not tied to wte after from_pretrained")
    fx = read_fixture(os.path.join(fixture, "expected.fx"))
    with torch.no_grad():
        logits = model(torch.from_numpy(fx["tokens"].astype(np.int64))).logits.float().numpy()
    err = np.abs(logits - fx["logits"]).max()
    print(f"from_pretrained({export_dir}): no missing/unexpected keys, lm_head tied; "
          f"max |logits - fixture| = {err:.3g}")
    if err > 1e-5:
        raise SystemExit("logits differ")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.normpath(os.path.join(here, "..", "..", "tests", "fixtures", "hf_gpt2_tiny"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=default)
    ap.add_argument("--check-export", metavar="DIR")
    args = ap.parse_args()
    if args.check_export:
        check_export(args.check_export, args.out)
    else:
        if os.path.isdir(args.out):
            shutil.rmtree(args.out)
        write(args.out)


if __name__ == "__main__":
    main()
