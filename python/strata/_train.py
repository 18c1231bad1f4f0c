"""Training: a job in this process (one rank), or ranks started through ``strata run``."""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from . import _strata
from ._capture import forward_c_output
from ._progress import Progress
from ._stop import StopRequest
from .config import ConfigSource, as_config
from .run import Run, close_open_runs


def drive(job: Any, stop: StopRequest, on_step: Callable[[dict[str, Any], dict[str, Any]], None]) -> bool:
    """Runs ``job`` to its last step or until a stop is requested (finishing and saving the step
    in flight, agreed over the ranks); calls ``on_step(metrics, step)`` after each step. Returns
    whether it stopped early."""
    while not job.finished:
        step = job.step()
        for line in step["micro_batch_changes"]:
            print(line, flush=True)
        on_step(json.loads(step["metrics"]), step)
        if job.end_step(stop.requested):
            return True
    return False


def train(config: ConfigSource, /, *, ranks: int = 1, metrics: str | None = None,
          log_dir: str | None = None, init_from: str | None = None, save_initial: bool = False,
          threads: int | None = None, progress: bool = True, **overrides: Any) -> Run:
    """Trains the GPT a configuration describes, as ``train_gpt`` does.

    With ``ranks=1`` the job runs in this process (on the GPU when ``strata.device`` is "auto"
    and one is usable), showing a progress bar (tqdm's notebook bar in a notebook) and printing
    what train_gpt prints before and after the steps. Ctrl-C (a notebook's interrupt) finishes the
    step in flight, saves a checkpoint (with ``strata.checkpoint.dir``) and returns the run with
    ``interrupted`` set. Running it again with the same checkpoint directory resumes bitwise
    (``strata.checkpoint.resume`` "auto"). With ``ranks`` > 1 the ranks are started through
    ``strata run`` (restarts, watchdog, per-rank logs) and followed through their metrics.

    Args:
        config: a :class:`strata.Config`, a JSON path or a dict (DeepSpeed's keys).
        ranks: processes to train on.
        metrics: also write the metrics as JSON lines to this file (``train_gpt --metrics``).
        log_dir: where the resolved config is written (default: the metrics file's or the
            checkpoint's folder).
        init_from: start from these weights with a fresh optimizer at step 0: a Strata
            checkpoint, a Hugging Face GPT-2 (a directory with model.safetensors) or an HDF5 export.
        save_initial: save the step-0 weights before the first step.
        threads: CPU compute threads (default: every core).
        progress: show the progress bar.
        **overrides: dotted keys, as for :class:`strata.Config`: ``**{"strata.train_steps": 50}``.

    Returns:
        A :class:`strata.Run`: ``metrics``, ``plot()``, ``checkpoint``, ``memory``,
        ``generate(prompt)``.

    Raises:
        ConfigError: the configuration has problems (all listed).
        OutOfMemory: a tier ran out; ``e.advice`` holds the changes that fit.
        StrataError: any other error (one line).
    """
    cfg = as_config(config, overrides)
    if ranks < 1:
        raise ValueError(f"ranks is {ranks}; give 1 or more")
    if ranks > 1:
        from ._ranks import train_ranks

        return train_ranks(cfg, ranks, metrics=metrics, log_dir=log_dir, init_from=init_from,
                           save_initial=save_initial, threads=threads, progress=progress)
    close_open_runs()
    with forward_c_output():
        job = _strata.Job(cfg._text(), cfg.source, os.fspath(metrics or ""), os.fspath(log_dir or ""),
                          os.fspath(init_from or ""), save_initial, threads or 0)
    run = Run(cfg, job)
    bar = Progress(job.total_steps, job.start_step, progress)

    def on_step(record: dict[str, Any], step: dict[str, Any]) -> None:
        run.records.append(record)
        run.step = record["step"]
        bar.update(record, step["line"], step["print"])

    try:
        with StopRequest() as stop, forward_c_output():
            run.interrupted = drive(job, stop, on_step)
            bar.close()
            run.memory = job.finish(not run.interrupted)
        run.step = job.step_count
    except BaseException:
        bar.close()
        run.close()
        raise
    if run.interrupted:
        print(f"stopped after step {run.step} (interrupted); checkpoint: {run.checkpoint}", flush=True)
    print(run.memory, end="", flush=True)
    return run
