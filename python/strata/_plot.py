"""Plots of a run's metrics with matplotlib: the panels of ``strata plot`` (docs/metrics.md)."""

from __future__ import annotations

from typing import Any

_MIB = float(1 << 20)


def plot_records(records: list[dict[str, Any]], path: str | None = None) -> Any:
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    ax[0][0].plot(steps, [r["loss"] for r in records], label="loss")
    val = [(r["step"], r["val_loss"]) for r in records if "val_loss" in r]
    if val:
        ax[0][0].plot(*zip(*val), "o-", label="validation loss")
    ax[0][0].set_title("loss")
    ax[0][0].legend()
    ax[0][1].plot(steps, [r["lr"] for r in records])
    ax[0][1].set_title("learning rate")
    ax[1][0].plot(steps, [r["tokens_per_s"] for r in records])
    ax[1][0].set_title("tokens/s")
    for tier in ("device", "host", "nvme"):
        peaks = [r.get("memory", {}).get(tier, {}).get("total", {}).get("peak", 0) / _MIB
                 for r in records]
        if any(peaks):
            ax[1][1].plot(steps, peaks, label=tier)
    ax[1][1].set_title("peak memory per step (MiB)")
    if ax[1][1].lines:
        ax[1][1].legend()
    for a in ax.flat:
        a.set_xlabel("step")
        a.grid(alpha=0.3)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    plt.close(fig)  # shown once: a notebook displays the returned figure
    return fig
