"""The progress display of a training run: tqdm's notebook bar where it can draw, its text bar
elsewhere, and the command line's progress lines when tqdm is not installed."""

from __future__ import annotations

import sys
from typing import Any


def _notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
        import ipywidgets  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class Progress:
    """A bar over the steps; ``update`` after each step with its metrics and console line."""

    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        self._bar: Any = None
        self._enabled = enabled
        if not enabled:
            return
        try:
            if _notebook():
                from tqdm.notebook import tqdm
            else:
                from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True)

    def update(self, metrics: dict[str, Any], line: str, print_due: bool) -> None:
        if not self._enabled:
            return
        if self._bar is None:  # no tqdm: train_gpt's lines
            if print_due:
                print(line, flush=True)
            return
        post = {"loss": f"{metrics['loss']:.4f}"}
        if "val_loss" in metrics:
            post["val"] = f"{metrics['val_loss']:.4f}"
        post["tok/s"] = f"{metrics['tokens_per_s']:.0f}"
        self._bar.set_postfix(post, refresh=False)
        self._bar.update(1)
        if print_due and "val_loss" in metrics:
            self._bar.write(line, file=sys.stdout)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
