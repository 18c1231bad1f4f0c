#!/usr/bin/env python3
"""llm.c's CUDA GPT-2 trainer beside Strata's: builds `train_gpt2cu` from a source archive of
karpathy/llm.c on the GPU machine (nvcc there; no network), trains a randomly initialised GPT-2
("-e d12": 124M, "d24": 350M) on random tokens for a few steps, and prints one JSON line in
pytorch_gpt2.py's form (mode "llmc": tokens_per_s, step_ms, mfu, peak_memory_bytes, losses).

    llmc_gpt2.py LLMC.tar.gz [--model 124M|350M] [--batch 8] [--seq 1024] [--steps 30]
                 [--warmup 10] [--work DIR] [--json-out FILE]
    llmc_gpt2.py --self-test    # what needs no GPU: the output's parsing, the token files


What it changes in llm.c, so that it builds with CUDA 13 and without Open MPI, NCCL or cuDNN
(the GPU machine has none): `make NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0`, the code for the
machine's GPU only, NVML linked through a link to the driver's libnvidia-ml.so.1, and one line of
llmc/cuda_utils.cuh: CUDA 13 made cudaMemAdvise's location a cudaMemLocation (the managed-memory
fallback on out of memory; not taken in this run). The training itself is llm.c's own defaults
(bf16, AdamW with master weights, GELU recomputed in backward: -r 1, ZeRO stage 0, no cuDNN: its
own attention kernels).

tokens_per_s: batch x seq over the median step time llm.c prints for the steps after --warmup
(each of its steps ends synchronised, as ours). MFU: llm.c's own figure (the median of its steps).
peak_memory_bytes: the device memory in use llm.c reports after allocating (cudaMemGetInfo: its
tensors plus the CUDA context and cuBLAS's workspace, so not comparable byte for byte with the
ledger's figure). Exit status 0 with finite losses, 1 on a failure (the JSON line has "error"),
2 without a GPU.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tarfile
import tempfile

STEP_RE = re.compile(r"^step\s+(\d+)/\d+ \| loss ([-+0-9.eEnaif]+) .*\| ([0-9.]+) ms \| "
                     r"([0-9.]+)% bf16 MFU \| ([0-9.]+) tok/s")
MEM_RE = re.compile(r"device memory usage: (\d+) MiB / (\d+) MiB")
MODELS = {"124M": "d12", "350M": "d24"}


def write_tokens(path, n, vocab, seed):
    """llm.c's token file: a header of 256 int32 (magic 20240520, version 1, count), then uint16."""
    import random
    rng = random.Random(seed)
    with open(path, "wb") as f:
        header = [0] * 256
        header[0], header[1], header[2] = 20240520, 1, n
        f.write(struct.pack("<256i", *header))
        chunk = 1 << 16
        left = n
        while left > 0:
            k = min(chunk, left)
            f.write(struct.pack(f"<{k}H", *(rng.randrange(vocab) for _ in range(k))))
            left -= k


def parse(lines, warmup):
    """The step lines and the memory line of llm.c's output."""
    steps, mem = [], None
    for line in lines:
        m = STEP_RE.match(line.strip())
        if m:
            steps.append({"step": int(m.group(1)), "loss": float(m.group(2)),
                          "ms": float(m.group(3)), "mfu": float(m.group(4)) / 100.0})
        m = MEM_RE.search(line)
        if m:
            mem = int(m.group(1)) * 2**20
    timed = [s for s in steps if s["step"] > warmup]
    return steps, timed, mem


def gpu_capability():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap,name",
                              "--format=csv,noheader"], capture_output=True, text=True)
    except OSError:  # no nvidia-smi: no driver
        return None, None
    if out.returncode != 0 or not out.stdout.strip():
        return None, None
    cap, name = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",", 1)]
    return cap.replace(".", ""), name


def build(src_tar, work, cap):
    with tarfile.open(src_tar) as t:
        t.extractall(work)
    roots = [d for d in os.listdir(work) if os.path.isfile(os.path.join(work, d, "train_gpt2.cu"))]
    if not roots:
        raise RuntimeError(f"{src_tar} holds no llm.c tree (no */train_gpt2.cu)")
    root = os.path.join(work, roots[0])
    cu = os.path.join(root, "llmc", "cuda_utils.cuh")
    text = open(cu).read()
    old = "cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)"
    new = ("cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, "
           "cudaMemLocation{cudaMemLocationTypeHost, 0})")
    if old in text and int(nvcc_major()) >= 13:
        open(cu, "w").write(text.replace(old, new))
    nvml = os.path.join(work, "nvml")
    os.makedirs(nvml, exist_ok=True)
    lib = subprocess.run("ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}'", shell=True,
                         capture_output=True, text=True).stdout.strip()
    if lib:
        os.symlink(lib, os.path.join(nvml, "libnvidia-ml.so"))
    cmd = ["make", "train_gpt2cu", "NO_MULTI_GPU=1", "NO_USE_MPI=1", "USE_CUDNN=0",
           f"GPU_COMPUTE_CAPABILITY={cap}", f"NVCC_LDLIBS=-L{nvml}"]
    env = dict(os.environ, PATH="/usr/local/cuda/bin:" + os.environ.get("PATH", ""))
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("make train_gpt2cu failed: " + (r.stdout + r.stderr)[-300:])
    return root


def nvcc_major():
    out = subprocess.run(["/usr/local/cuda/bin/nvcc", "--version"], capture_output=True, text=True)
    m = re.search(r"release (\d+)\.", out.stdout)
    return m.group(1) if m else "0"


SAMPLE = """device memory usage: 23456 MiB / 143771 MiB
step    1/30 | loss 11.012345 (+nanz)| norm 15.1234 (+nanz)| lr 3.00e-04 | 1234.56 ms | 12.3% bf16 MFU | 6789 tok/s
step   11/30 | loss 7.500000 (+1.20z)| norm 1.2345 (+0.10z)| lr 3.00e-04 | 18.50 ms | 45.6% bf16 MFU | 440000 tok/s
step   12/30 | loss 7.400000 (-0.20z)| norm 1.1345 (-0.10z)| lr 3.00e-04 | 18.70 ms | 45.1% bf16 MFU | 441000 tok/s"""


def self_test():
    """Checks what needs no GPU; returns the problems found."""
    problems = []
    steps, timed, mem = parse(SAMPLE.splitlines(), 10)
    if [s["step"] for s in steps] != [1, 11, 12] or [s["step"] for s in timed] != [11, 12]:
        problems.append(f"step lines parsed as {steps}")
    if timed and (timed[0]["ms"] != 18.5 or timed[0]["mfu"] != 0.456 or timed[1]["loss"] != 7.4):
        problems.append(f"step fields parsed as {timed}")
    if mem != 23456 * 2**20:
        problems.append(f"memory parsed as {mem}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.bin")
        write_tokens(path, 1000, 50257, 1)
        raw = open(path, "rb").read()
        header = struct.unpack("<256i", raw[:1024])
        tokens = struct.unpack("<1000H", raw[1024:])
        if header[:3] != (20240520, 1, 1000) or len(raw) != 1024 + 2000:
            problems.append(f"token file header {header[:3]}, {len(raw)} bytes")
        if max(tokens) >= 50257 or len(set(tokens)) < 900:
            problems.append("token file: ids outside the vocabulary or not random")
    return problems


def main():
    if sys.argv[1:] == ["--self-test"]:
        problems = self_test()
        for p in problems:
            print("llmc_gpt2 self-test: " + p, file=sys.stderr)
        print("llmc_gpt2 self-test: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
        return 1 if problems else 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="a .tar.gz of llm.c's tree (git archive --prefix=llm.c/ HEAD)")
    ap.add_argument("--model", choices=sorted(MODELS), default="124M")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--work", help="build and data folder (default: a temporary one, removed)")
    ap.add_argument("--json-out", help="also write the JSON line here")
    a = ap.parse_args()
    rec = {"impl": "llm.c", "mode": "llmc", "model": a.model, "batch": a.batch, "seq": a.seq,
           "steps": a.steps, "warmup": a.warmup}

    def emit(code):
        line = json.dumps(rec)
        print(line)
        if a.json_out:
            with open(a.json_out, "w") as f:
                f.write(line + "\n")
        return code

    if a.steps <= a.warmup or a.batch < 1 or a.seq < 1:
        print("llmc_gpt2: --steps must exceed --warmup; --batch and --seq >= 1", file=sys.stderr)
        return 2
    cap, name = gpu_capability()
    if not cap:
        print("llmc_gpt2: no GPU here (nvidia-smi lists none)", file=sys.stderr)
        rec["error"] = "no GPU"
        return emit(2)
    rec["gpu"] = name
    work = a.work or tempfile.mkdtemp(prefix="llmc-")
    try:
        root = build(os.path.abspath(a.source), work, cap)
        tokens = a.batch * a.seq * (a.steps + 2) + 1
        write_tokens(os.path.join(work, "train.bin"), tokens, 50257, 1)
        write_tokens(os.path.join(work, "val.bin"), a.batch * a.seq * 2 + 1, 50257, 2)
        cmd = ["./train_gpt2cu", "-e", MODELS[a.model], "-i", os.path.join(work, "train.bin"),
               "-j", os.path.join(work, "val.bin"), "-b", str(a.batch), "-t", str(a.seq),
               "-x", str(a.steps), "-v", "100000", "-m", "1", "-s", "100000", "-g", "8",
               "-n", "0", "-h", "0"]
        rec["command"] = " ".join(cmd)
        r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        lines = (r.stdout + r.stderr).splitlines()
        steps, timed, mem = parse(lines, a.warmup)
        if r.returncode != 0 or not timed:
            rec["error"] = (f"train_gpt2cu exited {r.returncode} after {len(steps)} steps: "
                            + " / ".join(lines[-3:]))[:400]
            return emit(1)
        step_ms = statistics.median(s["ms"] for s in timed)
        rec.update(tokens_per_s=a.batch * a.seq / (step_ms / 1e3), step_ms=step_ms,
                   mfu=statistics.median(s["mfu"] for s in timed), peak_memory_bytes=mem,
                   loss_first=steps[0]["loss"], loss_last=steps[-1]["loss"])
        finite = all(s["loss"] == s["loss"] and abs(s["loss"]) != float("inf") for s in steps)
        if not finite:
            rec["error"] = "a loss that is not finite"
            return emit(1)
        return emit(0)
    except Exception as e:  # the build or the data: one line
        rec["error"] = str(e)[:400]
        return emit(1)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
