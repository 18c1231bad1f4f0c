"""Training on several ranks from Python: the ranks are started by Strata's launcher (`strata run`:
mpirun, per-rank logs, restarts, watchdog), each running strata._rank, and followed
here through rank 0's metrics file. Ctrl-C asks them to finish the step, save and exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ._progress import Progress
from .config import Config
from ._rank import COMMAND as RANK_COMMAND
from .errors import StrataError
from .run import Run

LAUNCHER = Path(__file__).resolve().parent / "bin" / "strata"


def _follow(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete lines of `path` after `offset`, as metrics records, and the new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    lines = chunk[:end].decode().splitlines()
    return [json.loads(line) for line in lines if line.strip()], offset + end


def train_ranks(cfg: Config, ranks: int, *, metrics: str | None, log_dir: str | None,
                init_from: str | None, save_initial: bool, threads: int | None,
                progress: bool) -> Run:
    if not LAUNCHER.exists():
        raise StrataError(f"[python] the launcher {LAUNCHER} is missing: reinstall the package")
    work = Path(tempfile.mkdtemp(prefix="strata-ranks-"))
    metrics_path = Path(metrics) if metrics else work / "metrics.jsonl"
    spec = {"document": cfg.document, "source": cfg.source, "metrics": str(metrics_path),
            "log_dir": log_dir or "", "init_from": init_from or "", "save_initial": save_initial,
            "threads": threads or 0}
    (work / "job.json").write_text(json.dumps(spec))
    cmd = [str(LAUNCHER), "run", "-n", str(ranks), "--log-dir", str(work / "logs"), "--",
           sys.executable, "-c", RANK_COMMAND, str(work / "job.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tail: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            tail.append(line)
            del tail[:-20]
            sys.stdout.write(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    run = Run(cfg)
    bar = Progress(cfg["strata.train_steps"], 0, progress)
    offset = 0
    try:
        while True:
            try:
                done = proc.poll() is not None
                records, offset = _follow(metrics_path, offset)
                for r in records:
                    run.records.append(r)
                    run.step = r["step"]
                    bar.update(r, "", False)
                if done:
                    break
                time.sleep(0.2)
            except KeyboardInterrupt:
                run.interrupted = True
                proc.send_signal(signal.SIGINT)  # the launcher asks every rank to save and exit
    finally:
        bar.close()
        reader.join(timeout=10)
    if proc.returncode != 0:
        raise StrataError(f"[run] strata run exited with status {proc.returncode}: "
                          f"{''.join(tail[-3:]).strip()} (logs: {work / 'logs'})", "run", True)
    ck = cfg["strata.checkpoint.dir"]
    if ck:
        from . import _strata

        try:
            run._checkpoint = _strata.resolve_checkpoint_dir(ck)
        except Exception:
            run._checkpoint = None
    run.memory = "".join(tail)
    return run
