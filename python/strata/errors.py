"""Strata's errors as Python exceptions.

Every error the C++ library raises arrives as one of these: a configuration with problems as
:class:`ConfigError` (every problem at once, one line each, the same lines ``strata config check``
prints), memory that does not fit as :class:`OutOfMemory` (the breakdown and the advice as data),
anything else as :class:`StrataError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class StrataError(RuntimeError):
    """An error from Strata: ``str(e)`` is its one-line message, ``[tag] ...``.

    Attributes:
        tag: the subsystem that raised it (``"config"``, ``"checkpoint"``, ``"data"``, ...).
        bad_input: True when the input was wrong (a path, a value), False for an internal error.
    """

    def __init__(self, message: str, tag: str = "", bad_input: bool = True) -> None:
        super().__init__(message)
        self.tag = tag
        self.bad_input = bad_input


class ConfigError(StrataError, ValueError):
    """A configuration with problems: ``problems`` lists every one, one line each."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message, "config", True)
        self.problems = list(problems)


def _value(text: str) -> Any:
    """A ``--set`` value as the Python value a user would write ("3" → 3, "cpu" → "cpu")."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


class Change(Mapping):
    """One change to a configuration, as data: ``what`` it does and the keys it ``sets``.

    It is a mapping of dotted keys to values, so it can be passed back as overrides:
    ``strata.Config(cfg, **change)`` or ``cfg.replace(**change)``.
    """

    def __init__(self, text: str, sets: list[str]) -> None:
        self.text = text
        self.what = text.split(":", 1)[0]
        self.sets: dict[str, Any] = {}
        for assignment in sets:
            key, _, value = assignment.partition("=")
            self.sets[key] = _value(value)

    def __getitem__(self, key: str) -> Any:
        return self.sets[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.sets)

    def __len__(self) -> int:
        return len(self.sets)

    def __repr__(self) -> str:
        return f"Change({self.what!r}, {self.sets!r})"


class OutOfMemory(StrataError, MemoryError):
    """A memory tier ran out (its cap, or the device itself).

    Attributes:
        tier: ``"device"``, ``"host"`` or ``"nvme"``.
        category: what was being allocated (``"activations"``, ``"optimizer"``, ...).
        requested: bytes asked for.
        cap: the tier's cap in bytes.
        step_needs: what a whole training step needs on the tier (the memory planner's peak),
            or None when no planner knew.
        in_use: bytes in use on the tier by category.
        advice: the changes that fit, cheapest first, each a :class:`Change` that can be passed
            back to :class:`strata.Config`; those that are not config changes have no keys.
    """

    def __init__(self, message: str, info: dict[str, Any]) -> None:
        super().__init__(message, "memory", True)
        self.tier: str = info["tier"]
        self.category: str = info["category"]
        self.requested: int = info["requested"]
        self.cap: int = info["cap"]
        self.refused_by: str = info["refused_by"]
        self.step_needs: int | None = info["step_needs"]
        self.in_use: dict[str, int] = dict(info["in_use"])
        self.advice: list[Change] = [Change(a["text"], a["sets"]) for a in info["advice"]]
