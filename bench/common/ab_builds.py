#!/usr/bin/env python3
"""Two builds of train_gpt side by side on one config: which is faster, and do they train alike.

    bench/common/ab_builds.py OLD/train_gpt NEW/train_gpt --config job.json [--rounds 6]
        [--ranks 1] [--threads 1]

Runs OLD and NEW in turn, `--rounds` times each, alternating which goes first (so a drift of the
machine's speed falls on both), and reports per round the ratio NEW / OLD of the CPU seconds
(user + system) each run took, and their median. CPU seconds, not wall time: on a shared or loaded
machine wall time measures the neighbours; a single-threaded rank's CPU time measures the work
(with --ranks > 1, MPI's busy polling is counted too: prefer --ranks 1). Each run's last loss
must be the same in both builds, or the comparison stops: a change meant to keep the numbers
must keep them.

Used for issue #30's "performance unchanged" (the tree before the 1-bit optimizers went through
ops:: against the tree after: bench/README.md).
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return " ".join(f for f in ("avx2", "avx512f", "avx512bw", "avx512_bf16") if f in have)
    except OSError:
        pass
    return "unknown"


def run(binary, args, work, tag):
    metrics = work / f"{tag}.jsonl"
    cmd = [binary, "--config", args.config, "--threads", str(args.threads), "--metrics", str(metrics)]
    if args.ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(args.ranks)] + cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(work / f"{tag}.log", "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        sys.exit(f"ab_builds: {binary} failed (exit {rc}); see {work / (tag + '.log')}")
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    rows = [r for r in rows if r.get("rank", 0) == 0 and "loss" in r]
    if not rows:
        sys.exit(f"ab_builds: {binary} wrote no losses to {metrics}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, max(rows, key=lambda r: r["step"])["loss"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--config", required=True)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if args.rounds < 1:
        sys.exit("ab_builds: --rounds must be at least 1")
    for b in (args.old, args.new):
        if not os.access(b, os.X_OK):
            sys.exit(f"ab_builds: {b} is not an executable train_gpt")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cores; config {args.config}; "
          f"{args.ranks} rank(s) x {args.threads} thread(s)")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="strata_ab_") as tmp:
        work = pathlib.Path(tmp)
        for r in range(1, args.rounds + 1):
            order = ("old", "new") if r % 2 else ("new", "old")
            got = {}
            for which in order:
                got[which] = run(getattr(args, which), args, work, f"{which}_{r}")
            if got["old"][1] != got["new"][1]:
                sys.exit(f"ab_builds: round {r}: the last loss differs: old {got['old'][1]!r}, "
                         f"new {got['new'][1]!r}")
            ratio = got["new"][0] / got["old"][0]
            ratios.append(ratio)
            print(f"round {r} ({order[0]} first): old {got['old'][0]:.2f} cpu s, "
                  f"new {got['new'][0]:.2f} cpu s, new/old {ratio:.3f}, loss {got['new'][1]!r}")
    print(f"new/old cpu seconds: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} rounds; "
          f"last losses equal in every round")


if __name__ == "__main__":
    main()
