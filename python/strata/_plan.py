"""The memory planner: each rank's peak memory per tier before anything is allocated."""

from __future__ import annotations

import html
from typing import Any

from . import _strata
from .config import ConfigSource, as_config
from .errors import Change

_TIERS = ("device", "host", "nvme")


def _size(n: int | None) -> str:
    return "-" if n is None else _strata.format_bytes(n)


class Plan:
    """A memory plan (``strata plan``): what each rank's peak is per tier and category.

    Attributes:
        ranks, micro_batch, accumulation: what was planned.
        peak: bytes per tier (``{"device": ..., "host": ..., "nvme": ...}``).
        by_category: bytes per tier and category (``params``, ``grads``, ``optimizer``, ...).
        caps: each tier's cap in bytes (None: no cap).
        fits: whether every tier's peak is within its cap.
        recommendation: the fastest configuration that fits, as a :class:`strata.Change`
            (None when no option fits or none was asked for); pass it back to Config.
        options: every option the recommendation considered (dicts as ``strata plan --json``).
        text: the plan as ``strata plan`` prints it.

    Shown as a table in a notebook, as text elsewhere.
    """

    def __init__(self, data: dict[str, Any], text: str) -> None:
        self.ranks: int = data["ranks"]
        self.micro_batch: int = data["micro_batch"]
        self.accumulation: int = data["gradient_accumulation_steps"]
        self.peak: dict[str, int] = dict(data["peak"])
        self.by_category: dict[str, dict[str, int]] = dict(data["by_category"])
        self.caps: dict[str, int | None] = dict(data["caps"])
        self.fits: bool = data["fits"]
        self.text = text
        self.options: list[dict[str, Any]] = []
        self.recommendation: Change | None = None
        rec = data.get("recommendation")
        if rec:
            self.options = rec["options"]
            if rec["chosen"] is not None:
                o = self.options[rec["chosen"]]
                self.recommendation = Change(f"{o['option']}: {o.get('flags', '')}", o.get("sets", []))

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (f"Plan(ranks={self.ranks}, peak={{{', '.join(f'{t}: {_size(self.peak.get(t))}' for t in _TIERS)}}}, "
                f"fits={self.fits})")

    def _repr_html_(self) -> str:
        cats = sorted({c for t in _TIERS for c in self.by_category.get(t, {})})
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cats)
        rows = []
        for t in _TIERS:
            if not self.peak.get(t) and self.caps.get(t) is None:
                continue
            cells = "".join(f"<td>{_size(self.by_category.get(t, {}).get(c))}</td>" for c in cats)
            cap = self.caps.get(t)
            fits = cap is None or self.peak.get(t, 0) <= cap
            rows.append(f"<tr><th>{t}</th>{cells}<td><b>{_size(self.peak.get(t))}</b></td>"
                        f"<td>{_size(cap)}</td><td>{'✓' if fits else '✗ does not fit'}</td></tr>")
        out = (f"<p>Memory plan per rank: {self.ranks} rank(s), micro-batch {self.micro_batch} × "
               f"accumulation {self.accumulation} — <b>{'fits' if self.fits else 'does NOT fit'}</b></p>"
               f"<table><tr><th>tier</th>{head}<th>peak</th><th>cap</th><th>fits</th></tr>"
               + "".join(rows) + "</table>")
        if self.recommendation is not None:
            out += (f"<p>Recommended: {html.escape(self.recommendation.what)} "
                    f"<code>{html.escape(repr(dict(self.recommendation)))}</code></p>")
        elif self.options:
            out += "<p>No option of the ZeRO/offload ladder fits.</p>"
        return out


def plan(config: ConfigSource, /, *, device_memory: str | int | None = None,
         host_memory: str | int | None = None, nvme_memory: str | int | None = None,
         ranks: int = 1, recommend: bool = True, **overrides: Any) -> Plan:
    """Plans a configuration's memory before anything is allocated (``strata plan``).

    Builds the real job on the meta device and runs its steps, counting every allocation: each
    rank's peak per tier (device, host, nvme) and category, whether it fits the caps, and with
    ``recommend`` the fastest ZeRO/offload configuration that fits (docs/plan.md).

    Args:
        config: a :class:`strata.Config`, a path or a dict.
        device_memory, host_memory, nvme_memory: caps to plan against, e.g. ``"15GiB"`` (a T4);
            ``strata.memory.*_limit`` otherwise.
        ranks: the world size the job would run on.
        recommend: also plan DeepSpeed's ZeRO/offload ladder and recommend an option.
        **overrides: dotted keys, as for :class:`strata.Config`.

    Returns:
        A :class:`Plan` (a table in a notebook).
    """
    for tier, cap in (("device", device_memory), ("host", host_memory), ("nvme", nvme_memory)):
        if cap is not None:
            overrides[f"strata.memory.{tier}_limit"] = cap
    cfg = as_config(config, overrides)
    r = _strata.plan(cfg._text(), cfg.source, ranks, recommend)
    return Plan(r["plan"], r["text"])
