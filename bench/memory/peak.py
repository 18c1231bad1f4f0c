#!/usr/bin/env python3
"""Peak memory per tier of short train_gpt runs, for one build or two side by side.

Runs build/release/examples/train_gpt for a few steps of each configuration below and reads the
peak of each tier from the memory report it prints at the end (the ledger's figures: what storages
held, not what the caching allocator keeps). With --baseline BUILD it runs the same configurations
with another build (e.g. of an earlier commit) right after each run and prints both and their ratio.
With --planned it prints, per tier, the memory planner's prediction (train_gpt plans its job at
start-up) beside the busiest rank's measured peak of the whole run; --config FILE adds a
configuration file of one's own (e.g. the 3B NVMe-offload run of docs/plan.md).

    /usr/bin/python3 bench/memory/peak.py [--baseline /path/to/old/build/release] [--steps 2]
    /usr/bin/python3 bench/memory/peak.py --planned [--config big.json]

Configurations: the quickstart (f32, and with bf16 on) and a GPT-2 124M (12 layers, d=768,
12 heads, T=1024, vocab 50257, micro-batch 1, bf16 on). The data is the quickstart corpus
(scripts/quickstart prepares it).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
QUICK = "examples/gpt/configs/quickstart.json"
COMMON = ["--set", "strata.eval.interval=0", "--set", "strata.sample.tokens=0"]
GPT2_124M = ["--set", "strata.model.n_layer=12", "--set", "strata.model.n_head=12",
             "--set", "strata.model.n_embd=768", "--set", "strata.model.block_size=1024",
             "--set", "strata.model.vocab_size=50257", "--set", "train_micro_batch_size_per_gpu=1"]
BF16 = ["--set", "bf16.enabled=true"]
CONFIGS = [("quickstart f32", []), ("quickstart bf16", BF16), ("GPT-2 124M bf16", GPT2_124M + BF16)]
PLANNED = re.compile(r"^(device|host|nvme)\s+planned\s+(\S+) (\S+)\s+measured\s+(\S+) (\S+)")
ROW = re.compile(r"^(device|host|nvme)\s+total\s+\S+ \S+\s+(\S+) (\S+)$")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def run(build, name, extra, steps, threads, config=QUICK):
    exe = os.path.join(build, "examples", "train_gpt")
    cmd = [exe, "--config", config, "--threads", str(threads), "--set",
           f"strata.train_steps={steps}"] + COMMON + extra
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"peak.py: {name} with {build} failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return cmd, p


def planned(build, name, extra, steps, threads, config=QUICK):
    """{tier: (planned bytes, measured bytes)} from train_gpt's planned-vs-measured lines."""
    cmd, p = run(build, name, extra, steps, threads, config)
    out = {}
    for line in p.stdout.splitlines():
        m = PLANNED.match(line.strip())
        if m:
            out[m.group(1)] = (float(m.group(2)) * UNITS[m.group(3)],
                               float(m.group(4)) * UNITS[m.group(5)])
    if not out:
        sys.exit(f"peak.py: no planned-vs-measured lines in the output of {' '.join(cmd)}")
    return out


def peaks(build, name, extra, steps, threads):
    cmd, p = run(build, name, extra, steps, threads)
    out = {}
    in_report = False
    for line in p.stdout.splitlines():
        in_report = in_report or line.startswith("peak memory")
        m = ROW.match(line.strip()) if in_report else None
        if m:
            out[m.group(1)] = float(m.group(2)) * UNITS[m.group(3)]
    if not out:
        sys.exit(f"peak.py: no memory report in the output of {' '.join(cmd)}")
    return out


def mib(b):
    return f"{b / (1 << 20):.2f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--baseline", help="another build directory to compare with")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--planned", action="store_true",
                    help="the planner's prediction beside the measured peak, per tier")
    ap.add_argument("--config", action="append", default=[],
                    help="another train_gpt config file to include (with --planned)")
    a = ap.parse_args()
    if a.planned:
        print("| configuration | tier | planned | measured | planned / measured - 1 |")
        print("| --- | --- | --- | --- | --- |")
        runs = [(n, e, QUICK) for n, e in CONFIGS] + [(os.path.basename(c), [], c) for c in a.config]
        for name, extra, config in runs:
            for tier, (want, got) in planned(a.build, name, extra, a.steps, a.threads, config).items():
                diff = f"{100 * (want - got) / got:+.2f}%" if got else "-"
                print(f"| {name} | {tier} | {mib(want)} | {mib(got)} | {diff} |")
        return 0
    head = "| configuration | tier | peak |" if not a.baseline else \
        "| configuration | tier | peak (this build) | peak (baseline) | this / baseline |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for name, extra in CONFIGS:
        now = peaks(a.build, name, extra, a.steps, a.threads)
        base = peaks(a.baseline, name, extra, a.steps, a.threads) if a.baseline else None
        for tier in ("device", "host"):
            if max(now.get(tier, 0.0), (base or {}).get(tier, 0.0)) < (1 << 20):
                continue  # a few KiB of host bookkeeping: not what this compares
            x = now.get(tier, 0.0)
            if base is None:
                print(f"| {name} | {tier} | {mib(x)} |")
            else:
                y = base.get(tier, 0.0)
                ratio = f"{x / y:.3f}" if y else "-"
                print(f"| {name} | {tier} | {mib(x)} | {mib(y)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
