"""A training run's results: metrics, checkpoint, memory report, plots and samples."""

from __future__ import annotations

import weakref
from typing import Any

from .config import Config

_open_runs: "weakref.WeakSet[Run]" = weakref.WeakSet()


def close_open_runs() -> None:
    """Closes every run that still holds its model (one job holds the process's memory at a time)."""
    for run in list(_open_runs):
        run.close()


class Run:
    """The result of :func:`strata.train`.

    Attributes:
        config: the configuration it ran.
        records: one dict per step (the fields of ``train_gpt --metrics``: docs/metrics.md).
        interrupted: True when it stopped early (Ctrl-C, a notebook's interrupt): the step in
            flight was finished and saved.
        memory: the end-of-run memory report (peaks per tier and category, the plan beside the
            measured peaks).
        step: the last completed step.
    """

    def __init__(self, config: Config, job: Any = None) -> None:
        self.config = config
        self.records: list[dict[str, Any]] = []
        self.interrupted = False
        self.memory = ""
        self.step = 0
        self._checkpoint: str | None = None
        self._job = job
        self._vocab_size: int = config["strata.model.vocab_size"]
        if job is not None:
            _open_runs.add(self)

    @property
    def metrics(self) -> Any:
        """Every step's metrics: a pandas DataFrame (nested fields as ``memory.device.total.peak``)
        when pandas is installed, else the list of dicts (``records``)."""
        try:
            import pandas  # type: ignore[import-untyped]
        except ImportError:
            return self.records
        return pandas.json_normalize(self.records)

    @property
    def checkpoint(self) -> str | None:
        """The newest checkpoint this run saved (a step directory), or None."""
        if self._job is not None:
            self._checkpoint = self._job.last_checkpoint() or None
        return self._checkpoint

    def plot(self, path: str | None = None) -> Any:
        """Loss (and validation loss), learning rate, tokens/s and peak memory per tier against
        the step, with matplotlib (inline in a notebook). Saves to ``path`` when given; returns the
        Figure."""
        from ._plot import plot_records

        return plot_records(self.records, path)

    def generate(self, prompt: str | list[int], max_new_tokens: int = 100, *,
                 temperature: float = 0.8, top_k: int = 40, seed: int | None = None,
                 tokenizer: Any = None) -> str | list[int]:
        """Continues ``prompt`` with the trained model.

        A string prompt is encoded with ``tokenizer`` (a :class:`strata.data.Tokenizer`), or as
        bytes when the vocabulary is 256; the continuation comes back decoded the same way. A
        list of token ids gives a list of ids. ``temperature`` <= 0 is greedy; ``top_k`` <= 0
        samples the whole vocabulary; ``seed`` defaults to the config's ``strata.seed``.
        """
        if self._job is None:
            raise RuntimeError(
                "this run no longer holds its model (closed, or trained on several ranks): start "
                "one from its checkpoint, strata.train(cfg, init_from=run.checkpoint, "
                "**{'strata.train_steps': 1}), and generate from that")
        ids: list[int]
        if isinstance(prompt, str):
            if tokenizer is not None:
                ids = list(tokenizer.encode(prompt))
            elif self._vocab_size == 256:
                ids = list(prompt.encode("utf-8"))
            else:
                raise ValueError(
                    f"the vocabulary has {self._vocab_size} tokens, not bytes: give tokenizer= "
                    "(strata.data.Tokenizer.gpt2(vocab, merges)) or a list of token ids")
        else:
            ids = [int(t) for t in prompt]
        out = self._job.sample(ids, max_new_tokens, temperature, top_k,
                               self.config["strata.seed"] if seed is None else seed)
        if not isinstance(prompt, str):
            return list(out)
        if tokenizer is not None:
            return tokenizer.decode(out)
        return bytes(t & 0xFF for t in out).decode("utf-8", errors="replace")

    def close(self) -> None:
        """Frees the model and the optimizer state (metrics, checkpoint and report stay)."""
        if self._job is not None:
            self._checkpoint = self._job.last_checkpoint() or None
            self._job.close()
            self._job = None
        _open_runs.discard(self)

    def __repr__(self) -> str:
        last = self.records[-1] if self.records else None
        loss = f", loss {last['loss']:.4f}" if last else ""
        state = " (interrupted)" if self.interrupted else ""
        return f"Run(step {self.step}{loss}{state}, checkpoint {self.checkpoint!r})"
