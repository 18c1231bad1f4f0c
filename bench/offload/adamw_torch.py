#!/usr/bin/python3
"""torch.optim.AdamW on one fp32 tensor of N parameters, for bench_offload_adamw's comparison.

Prints one JSON line: {"params_per_s": ..., "foreach": ..., "threads": ..., "torch": ...}.
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--foreach", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(a.params, generator=g) * 0.02)
    p.grad = torch.randn(a.params, generator=g) * 1e-3
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.1, foreach=a.foreach)
    opt.step()  # allocates m and v
    times = []
    for _ in range(a.iters):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    print(json.dumps({"params_per_s": a.params / med, "seconds": med, "foreach": a.foreach,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
