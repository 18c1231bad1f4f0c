#!/usr/bin/python3
"""Strata vs PyTorch GPT training on the CPU, in one run: tokens/s, their ratio, model FLOP
utilisation and activation bytes per token, at each thread count.

  /usr/bin/python3 bench/gpt_cpu/run.py [--threads 2,1] [--repeats 3] [--build build/release]

Each repeat runs bench_gpt_cpu (Strata; it also times a large sgemm on the same threads, the peak
MFU is measured against) and gpt_torch.py (PyTorch) back to back with the same thread count in
OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS, alternating which goes first; the
report gives the median over repeats, the spread (min..max) and the ratio of the medians. Both train the same GPT (default L=4, d=256,
4 heads, T=256, micro-batch 8, vocab 256, fp32, AdamW) on random tokens.

MFU = flops_per_token × tokens/s / sgemm FLOP/s, with flops_per_token = 6·N + 12·L·T·C (PaLM's
convention; N = parameters that take part in matmuls, i.e. all but the position table).
Activation bytes per token: Strata's is the ledger's peak of activations + workspace during a
step (and what is held between forward and backward); PyTorch's is the storages autograd saves
(see gpt_torch.py). --malloc tuned runs BOTH sides with glibc told never to return freed memory
to the OS (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_), which removes page-fault costs;
--wait-policy passive sets OMP_WAIT_POLICY for both (idle OpenMP threads sleep instead of
spinning, which matters on a machine shared with other work).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in output:\n" + text)


def run(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return last_json(p.stdout)


def spread(xs):
    return f"{statistics.median(xs):9.1f} ({min(xs):.0f}..{max(xs):.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="2,1", help="comma-separated thread counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--sgemm", type=int, default=2048, help="n of the n^3 peak sgemm")
    ap.add_argument("--malloc", choices=["default", "tuned"], default="default")
    ap.add_argument("--wait-policy", choices=["default", "active", "passive"], default="default",
                    help="OMP_WAIT_POLICY for both sides (passive copes better with a busy machine)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--json", help="also write every run's JSON here")
    ap.add_argument("--baseline", help="another build directory (e.g. of an earlier commit) whose "
                    "bench_gpt_cpu runs in the same repeats: before/after ratios")
    a = ap.parse_args()

    exe = os.path.join(a.build, "bench", "gpt_cpu", "bench_gpt_cpu")
    if not os.path.exists(exe):
        sys.exit(f"run.py: {exe} not found; build it: cmake --build {a.build} --target bench_gpt_cpu")
    shape = ["--layers", a.layers, "--heads", a.heads, "--seq", a.seq, "--batch", a.batch,
             "--vocab", a.vocab, "--steps", a.steps, "--warmup", a.warmup]
    strata_cmd = [exe, "--embd", a.embd, "--sgemm", a.sgemm] + shape
    cmds = {"strata": strata_cmd}
    if a.baseline:
        base_exe = os.path.join(a.baseline, "bench", "gpt_cpu", "bench_gpt_cpu")
        if not os.path.exists(base_exe):
            sys.exit(f"run.py: {base_exe} not found; build it: cmake --build {a.baseline} "
                     "--target bench_gpt_cpu")
        cmds["baseline"] = [base_exe] + strata_cmd[1:]
    torch_cmd = [sys.executable if sys.executable.startswith("/usr/bin") else "/usr/bin/python3",
                 os.path.join(HERE, "gpt_torch.py"), "--n-layer", a.layers, "--n-embd", a.embd,
                 "--n-head", a.heads, "--seq", a.seq, "--batch", a.batch, "--vocab", a.vocab,
                 "--steps", a.steps, "--warmup", a.warmup]
    threads = [int(t) for t in a.threads.split(",")]
    runs = []
    for r in range(a.repeats):
        for k in threads:
            # PyTorch (Debian) runs matmuls on OpenBLAS's own pthread pool: without
            # OPENBLAS_NUM_THREADS its "1 thread" would still use every core for them.
            env = dict(os.environ, OMP_NUM_THREADS=str(k), MKL_NUM_THREADS=str(k),
                       OPENBLAS_NUM_THREADS=str(k))
            if a.wait_policy != "default":
                env["OMP_WAIT_POLICY"] = a.wait_policy
            if a.malloc == "tuned":
                env.update(MALLOC_MMAP_THRESHOLD_="2147483647", MALLOC_TRIM_THRESHOLD_="4294967295")
            impls = list(cmds) + ["pytorch"]
            order = impls[r % len(impls):] + impls[:r % len(impls)]  # each goes first in turn
            for impl in order:
                cmd = cmds.get(impl, torch_cmd)
                out = run([str(c) for c in cmd] + ["--threads", str(k)], env)
                out["repeat"] = r
                out["impl"] = impl
                runs.append(out)
                print(f"  repeat {r} threads {k} {impl:8s} {out['tokens_per_s']:9.1f} tokens/s",
                      file=sys.stderr, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            for o in runs:
                f.write(json.dumps(o) + "\n")

    print(f"GPT L={a.layers} d={a.embd} heads={a.heads} T={a.seq} micro-batch={a.batch} "
          f"vocab={a.vocab} fp32 AdamW; {a.repeats} repeats x {a.steps} timed steps; "
          f"malloc {a.malloc}; OMP_WAIT_POLICY {a.wait_policy}; median (min..max)")
    summary = {}
    for k in threads:
        s = [o for o in runs if o["impl"] == "strata" and o["threads"] == k]
        p = [o for o in runs if o["impl"] == "pytorch" and o["threads"] == k]
        st = [o["tokens_per_s"] for o in s]
        pt = [o["tokens_per_s"] for o in p]
        fpt = s[0]["flops_per_token"]
        peak = statistics.median(o["sgemm_gflops"] for o in s) * 1e9
        ratios = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(s, p)]
        ratio = statistics.median(st) / statistics.median(pt)
        print(f"threads {k}:")
        print(f"  tokens/s       strata {spread(st)}   pytorch {spread(pt)}")
        print(f"  ratio          {ratio:.2f}x (per-repeat {min(ratios):.2f}..{max(ratios):.2f})")
        if a.baseline:
            b = [o for o in runs if o["impl"] == "baseline" and o["threads"] == k]
            bt = [o["tokens_per_s"] for o in b]
            after = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(s, b)]
            print(f"  baseline       {spread(bt)}   vs pytorch "
                  f"{statistics.median(bt) / statistics.median(pt):.2f}x")
            print(f"  after/before   {statistics.median(after):.2f}x (per-repeat "
                  f"{min(after):.2f}..{max(after):.2f})   activation bytes/token "
                  f"{s[0]['peak_activation_bytes_per_token']:.0f} vs "
                  f"{b[0]['peak_activation_bytes_per_token']:.0f}")
            # Process CPU time per step: what a busy machine disturbs least (wall time includes
            # the time other processes held the cores).
            cpu = [x["cpu_ms"] / y["cpu_ms"] for x, y in zip(s, b)]
            print(f"  CPU/step a/b   {statistics.median(cpu):.3f}x (per-repeat "
                  f"{min(cpu):.3f}..{max(cpu):.3f})")
        if peak > 0:
            # Per repeat against the sgemm of that repeat's Strata run (seconds apart, so a load
            # change on a shared machine hits both), then the median over repeats.
            mfu_s = [fpt * x["tokens_per_s"] / (x["sgemm_gflops"] * 1e9) for x in s]
            mfu_p = [fpt * y["tokens_per_s"] / (x["sgemm_gflops"] * 1e9) for x, y in zip(s, p)]
            print(f"  MFU            strata {statistics.median(mfu_s):.1%} ({min(mfu_s):.0%}.."
                  f"{max(mfu_s):.0%})   pytorch {statistics.median(mfu_p):.1%} ({min(mfu_p):.0%}.."
                  f"{max(mfu_p):.0%})   (sgemm {a.sgemm}^3 median {peak * 1e-9:.0f} GFLOP/s, "
                  f"{fpt / 1e6:.1f} MFLOP/token)")
        print(f"  act bytes/tok  strata peak {s[0]['peak_activation_bytes_per_token']:.0f} "
              f"(held fwd->bwd {s[0]['saved_activation_bytes_per_token']:.0f})   pytorch saved "
              f"{p[0]['peak_activation_bytes_per_token']:.0f} (RSS delta "
              f"{statistics.median(o['rss_peak_delta_bytes_per_token'] or 0 for o in p):.0f})")
        print(f"  strata phases  forward {statistics.median(o['forward_ms'] for o in s):.1f} ms, "
              f"backward {statistics.median(o['backward_ms'] for o in s):.1f} ms, optimizer "
              f"{statistics.median(o['optimizer_ms'] for o in s):.1f} ms")
        summary[k] = ratio
    return 0


if __name__ == "__main__":
    sys.exit(main())
