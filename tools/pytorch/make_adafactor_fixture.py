#!/usr/bin/env python3
"""Writes tests/fixtures/adafactor.fx: 10 Adafactor steps that Strata's Adafactor must reproduce.

The reference is transformers' `Adafactor` (transformers.optimization) on Debian's PyTorch 1.13:

    pip install --target /tmp/tf transformers==4.40.2 && rm -rf /tmp/tf/numpy*   # once
    PYTHONPATH=/tmp/tf /usr/bin/python3 tools/pytorch/make_adafactor_fixture.py [--out PATH]

Every number is also recomputed here in float64 straight from the formulas of Shazeer & Stern
2018 as transformers implements them (factored second moment from row/column means of
grad² + eps1, update clipping by RMS, relative step, parameter scaling, optional beta1, decoupled
weight decay), and the script stops unless both agree to 2e-5 relative, so a transformers
release that changed its arithmetic would be noticed.

Cases (hyperparameters stored in the file as f64 entries <case>/hyper/<name>; beta1 < 0 = None,
lr = 0 with relative_step):
  default  Adafactor(params)                     relative step, scale_parameter, no beta1
  beta1    lr=1e-2, relative_step=False, scale_parameter=False, beta1=0.9, weight_decay=0.1
  warmup   warmup_init=True, decay_rate=-0.5, clip_threshold=0.5, eps=(1e-30, 1e-2)
Parameters: W [6, 10] and E [13, 4] (factored), b [10] (a vector). Gradients: seeded normals
times a per-step scale (1, 0.01, 100, ...) so that clipping engages on some steps.
Entries: <case>/<p>/init, <case>/step<k>/<p>/grad (k = 1..10), <case>/step<k>/<p>/value (after
step k).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_io import write_fixture  # noqa: E402

from transformers.optimization import Adafactor  # noqa: E402

SHAPES = {"W": (6, 10), "E": (13, 4), "b": (10,)}
STEPS = 10
SCALES = [1.0, 0.01, 100.0, 1.0, 3.0, 0.3, 1.0, 10.0, 0.1, 1.0]
CASES = {
    "default": dict(lr=None),
    "beta1": dict(lr=1e-2, relative_step=False, scale_parameter=False, beta1=0.9,
                  weight_decay=0.1),
    "warmup": dict(lr=None, warmup_init=True, decay_rate=-0.5, clip_threshold=0.5,
                   eps=(1e-30, 1e-2)),
}
DEFAULTS = dict(lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False)


def reference(hp, init, grads):
    """Adafactor in float64 from the formulas; returns the values after each step."""
    p = {k: v.astype(np.float64) for k, v in init.items()}
    st = {}
    out = []
    for t in range(1, STEPS + 1):
        for k in SHAPES:
            g = grads[t - 1][k].astype(np.float64)
            s = st.setdefault(k, {})
            rms_p = math.sqrt(np.mean(p[k] ** 2))
            rho = hp["lr"] if not hp["relative_step"] else min(
                1e-6 * t if hp["warmup_init"] else 1e-2, 1.0 / math.sqrt(t))
            lr = max(hp["eps"][1], rms_p) * rho if hp["scale_parameter"] else rho
            b2 = 1.0 - t ** hp["decay_rate"]
            u2 = g ** 2 + hp["eps"][0]
            if g.ndim >= 2:
                r = s.get("row", np.zeros(g.shape[0]))
                c = s.get("col", np.zeros(g.shape[1]))
                r = b2 * r + (1 - b2) * u2.mean(axis=1)
                c = b2 * c + (1 - b2) * u2.mean(axis=0)
                s["row"], s["col"] = r, c
                upd = (1 / np.sqrt(r / r.mean()))[:, None] * (1 / np.sqrt(c))[None, :] * g
            else:
                v = b2 * s.get("v", np.zeros(g.shape)) + (1 - b2) * u2
                s["v"] = v
                upd = g / np.sqrt(v)
            upd = upd / max(1.0, math.sqrt(np.mean(upd ** 2)) / hp["clip_threshold"])
            upd = upd * lr
            if hp["beta1"] is not None:
                m = hp["beta1"] * s.get("m", np.zeros(g.shape)) + (1 - hp["beta1"]) * upd
                s["m"] = m
                upd = m
            if hp["weight_decay"] != 0:
                p[k] = p[k] - hp["weight_decay"] * lr * p[k]
            p[k] = p[k] - upd
        out.append({k: v.copy() for k, v in p.items()})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests",
                                                  "fixtures", "adafactor.fx"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    entries = []
    worst = 0.0
    for ci, (case, kw) in enumerate(CASES.items()):
        hp = dict(DEFAULTS, **kw)
        gen = torch.Generator().manual_seed(1000 + ci)
        init = {k: torch.randn(s, generator=gen) * 0.5 for k, s in SHAPES.items()}
        grads = [{k: torch.randn(s, generator=gen) * SCALES[t] for k, s in SHAPES.items()}
                 for t in range(STEPS)]
        params = {k: torch.nn.Parameter(v.clone()) for k, v in init.items()}
        opt = Adafactor(list(params.values()), **kw)
        for name, val in (("lr", hp["lr"] or 0.0), ("eps1", hp["eps"][0]), ("eps2", hp["eps"][1]),
                          ("clip_threshold", hp["clip_threshold"]),
                          ("decay_rate", hp["decay_rate"]),
                          ("beta1", -1.0 if hp["beta1"] is None else hp["beta1"]),
                          ("weight_decay", hp["weight_decay"]),
                          ("scale_parameter", float(hp["scale_parameter"])),
                          ("relative_step", float(hp["relative_step"])),
                          ("warmup_init", float(hp["warmup_init"]))):
            entries.append((f"{case}/hyper/{name}", np.array(val, dtype=np.float64)))
        for k in SHAPES:
            entries.append((f"{case}/{k}/init", init[k].numpy().astype(np.float32)))
        ref = reference(hp, {k: v.numpy() for k, v in init.items()},
                        [{k: v.numpy() for k, v in g.items()} for g in grads])
        for t in range(STEPS):
            for k, p in params.items():
                p.grad = grads[t][k].clone()
            opt.step()
            for k, p in params.items():
                got = p.detach().numpy().astype(np.float32)
                want = ref[t][k]
                err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
                worst = max(worst, err)
                if err > 2e-5:
                    sys.exit(f"{case} step {t + 1} {k}: transformers and the float64 formulas "
                             f"differ by {err:.2e} (relative)")
                entries.append((f"{case}/step{t + 1}/{k}/grad",
                                grads[t][k].numpy().astype(np.float32)))
                entries.append((f"{case}/step{t + 1}/{k}/value", got))
    write_fixture(os.path.normpath(args.out), entries)
    print(f"wrote {os.path.normpath(args.out)}: {len(entries)} entries; transformers vs the "
          f"float64 formulas: max relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
