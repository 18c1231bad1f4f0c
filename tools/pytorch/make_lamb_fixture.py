#!/usr/bin/env python3
"""Writes tests/fixtures/lamb.fx: 10 LAMB steps that Strata's Lamb must reproduce.

The reference is DeepSpeed's FusedLamb (csrc/lamb/fused_lamb_cuda_kernel.cu) written out here in
float32 numpy, operation by operation as Strata's kernel documents them (framework/optim/lamb.hpp):

    g  = grad * grad_scale
    m' = b1*m + (1-b1)*g ;  v' = b2*v + ((1-b2)*g)*g
    u  = m' / (sqrt(v') + eps) + wd*p          (eps_inside_sqrt: sqrt(v' + eps))
    ratio = clamp(||p|| / ||u||, min_coeff, max_coeff)   (1 when either norm is 0)
    step  = lr*sqrt(1-b2^t)/(1-b1^t) with bias_correction, else lr
    p  = p - float(step*ratio) * u

Only Debian's python3-numpy is needed:  /usr/bin/python3 tools/pytorch/make_lamb_fixture.py
Every step is also recomputed in float64 from the formulas of You et al. 2019 as FusedLamb
implements them, and the script stops unless both agree to 1e-4 relative.

Cases (hyperparameters as f64 entries <case>/hyper/<name>):
  bert     DeepSpeed's BERT recipe: lr 2e-3, weight_decay 0.01, bias_correction false,
           max_coeff 0.3, min_coeff 0.01 (the clamp engages)
  default  FusedLamb's defaults (lr 1e-3, bias_correction, no decay, coeff in [0.01, 10])
  inside   eps_inside_sqrt, eps 1e-6, weight_decay 0.1, betas (0.8, 0.99), grad_scale 0.5
Parameters: W [6, 10], b [10] (one unit) and E [13, 4] (another); Z [5] starts at zero (its
trust ratio is 1). Entries: <case>/<p>/init, <case>/step<k>/<p>/grad, <case>/step<k>/<p>/value,
<case>/step<k>/<p>/ratio (k = 1..10).
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_io import write_fixture  # noqa: E402

SHAPES = {"W": (6, 10), "b": (10,), "E": (13, 4), "Z": (5,)}
STEPS = 10
SCALES = [1.0, 0.01, 100.0, 1.0, 3.0, 0.3, 1.0, 10.0, 0.1, 1.0]
DEFAULTS = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                bias_correction=1.0, max_coeff=10.0, min_coeff=0.01, eps_inside_sqrt=0.0,
                grad_scale=1.0)
CASES = {
    "bert": dict(lr=2e-3, weight_decay=0.01, bias_correction=0.0, max_coeff=0.3, min_coeff=0.01),
    "default": dict(),
    "inside": dict(eps_inside_sqrt=1.0, eps=1e-6, weight_decay=0.1, beta1=0.8, beta2=0.99,
                   grad_scale=0.5),
}
F = np.float32
CHUNK = 16384  # framework/optim/chunked.hpp: sums add per-chunk partials in chunk order


def sum_sq(x):
    """Sum of squares in double, element after element per chunk, chunks in order."""
    total = 0.0
    for c in range(0, x.size, CHUNK):
        part = 0.0
        for e in x.reshape(-1)[c:c + CHUNK]:
            part += float(e) * float(e)
        total += part
    return total


def step_f32(hp, t, p, g, m, v):
    gs = F(hp["grad_scale"])
    b1, c1 = F(hp["beta1"]), F(1.0 - hp["beta1"])
    b2, c2 = F(hp["beta2"]), F(1.0 - hp["beta2"])
    eps, wd = F(hp["eps"]), F(hp["weight_decay"])
    g = g * gs
    m = b1 * m + c1 * g
    v = b2 * v + (c2 * g) * g
    denom = np.sqrt(v + eps) if hp["eps_inside_sqrt"] else np.sqrt(v) + eps
    u = m / denom + wd * p
    w_sq, u_sq = sum_sq(p), sum_sq(u)
    ratio = 1.0
    if w_sq != 0.0 and u_sq != 0.0:
        ratio = min(max(math.sqrt(w_sq) / math.sqrt(u_sq), hp["min_coeff"]), hp["max_coeff"])
    lr = hp["lr"]
    step = lr * math.sqrt(1.0 - hp["beta2"] ** t) / (1.0 - hp["beta1"] ** t) \
        if hp["bias_correction"] else lr
    p = p - F(step * ratio) * u
    return p, m, v, ratio


def step_f64(hp, t, p, g, m, v):
    g = g * hp["grad_scale"]
    m = hp["beta1"] * m + (1 - hp["beta1"]) * g
    v = hp["beta2"] * v + (1 - hp["beta2"]) * g * g
    denom = np.sqrt(v + hp["eps"]) if hp["eps_inside_sqrt"] else np.sqrt(v) + hp["eps"]
    u = m / denom + hp["weight_decay"] * p
    wn, un = np.linalg.norm(p), np.linalg.norm(u)
    ratio = 1.0 if wn == 0 or un == 0 else min(max(wn / un, hp["min_coeff"]), hp["max_coeff"])
    step = hp["lr"] * math.sqrt(1 - hp["beta2"] ** t) / (1 - hp["beta1"] ** t) \
        if hp["bias_correction"] else hp["lr"]
    return p - step * ratio * u, m, v, ratio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests",
                                                  "fixtures", "lamb.fx"))
    args = ap.parse_args()
    entries, worst = [], 0.0
    for ci, (case, kw) in enumerate(CASES.items()):
        hp = dict(DEFAULTS, **kw)
        rng = np.random.default_rng(2000 + ci)
        init = {k: (rng.standard_normal(s) * 0.5).astype(F) for k, s in SHAPES.items()}
        init["Z"][:] = 0
        grads = [{k: (rng.standard_normal(s) * SCALES[t]).astype(F) for k, s in SHAPES.items()}
                 for t in range(STEPS)]
        for name, val in hp.items():
            entries.append((f"{case}/hyper/{name}", np.array(val, dtype=np.float64)))
        for k in SHAPES:
            entries.append((f"{case}/{k}/init", init[k]))
        st32 = {k: [init[k].copy(), np.zeros(s, F), np.zeros(s, F)] for k, s in SHAPES.items()}
        st64 = {k: [init[k].astype(np.float64), np.zeros(s), np.zeros(s)] for k, s in SHAPES.items()}
        for t in range(1, STEPS + 1):
            for k in SHAPES:
                g = grads[t - 1][k]
                p, m, v, ratio = step_f32(hp, t, *[st32[k][0], g, st32[k][1], st32[k][2]])
                st32[k] = [p, m, v]
                p64, m64, v64, r64 = step_f64(hp, t, st64[k][0], g.astype(np.float64), st64[k][1],
                                              st64[k][2])
                st64[k] = [p64, m64, v64]
                err = np.max(np.abs(p - p64)) / max(np.max(np.abs(p64)), 1e-30)
                worst = max(worst, err, abs(ratio - r64) / r64)
                if worst > 1e-4:
                    sys.exit(f"{case} step {t} {k}: float32 and float64 differ by {worst:.2e}")
                entries.append((f"{case}/step{t}/{k}/grad", g))
                entries.append((f"{case}/step{t}/{k}/value", p))
                entries.append((f"{case}/step{t}/{k}/ratio", np.array(ratio, dtype=np.float64)))
    write_fixture(os.path.normpath(args.out), entries)
    print(f"wrote {os.path.normpath(args.out)}: {len(entries)} entries; float32 vs float64: max "
          f"relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
