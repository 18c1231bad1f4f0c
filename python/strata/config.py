"""Configurations: a DeepSpeed-style JSON config (a file or a dict) with overrides."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Union

from . import _strata

ConfigSource = Union[str, "os.PathLike[str]", Mapping[str, Any], "Config", None]


def override_text(value: Any) -> str:
    """A Python value as the text of ``--set key=TEXT`` (strings as they are, the rest as JSON)."""
    return value if isinstance(value, str) else json.dumps(value)


def override_key(key: str) -> str:
    """``zero_optimization__stage`` (a keyword argument) is ``zero_optimization.stage``."""
    return key.replace("__", ".")


class Config:
    """A validated training configuration.

    ``Config(source, **overrides)``: ``source`` is a JSON file's path, a dict in DeepSpeed's
    format (``train_micro_batch_size_per_gpu``, ``zero_optimization``, ``optimizer``, ... and a
    ``strata`` section; docs/config.md), another Config, or None for the defaults. Each override
    sets one dotted key as ``--set`` does on the command line: ``Config("ds.json",
    **{"zero_optimization.stage": 3})`` or ``Config("ds.json", zero_optimization__stage=3)``.
    Every problem is raised at once as :class:`strata.ConfigError`, with the command line's lines.

    Attributes:
        document: the configuration as given, with the overrides applied.
        resolved: every key with its value, defaults included (what a job runs with).
        notes: one line each for DeepSpeed keys read as no-ops, old names, "auto" values.
        source: where it came from (a path, or "config").

    Example::

        cfg = strata.Config("examples/gpt/configs/quickstart.json", **{"strata.train_steps": 20})
        cfg["zero_optimization.stage"]  # 0
    """

    def __init__(self, source: ConfigSource = None, /, **overrides: Any) -> None:
        if isinstance(source, Config):
            text, name = json.dumps(source.document), source.source
        elif isinstance(source, Mapping):
            text, name = json.dumps(dict(source)), "config"
        elif source is None:
            text, name = "{}", "config"
        elif isinstance(source, (str, os.PathLike)):
            name = os.fspath(source)
            text = _strata.read_config_file(name)
        else:
            raise TypeError(
                f"strata.Config: a path, a dict or a Config, not {type(source).__name__}")
        sets = [(override_key(k), override_text(v)) for k, v in overrides.items()]
        r = _strata.check_config(text, sets, name)
        self.source: str = name
        self.document: dict[str, Any] = json.loads(r["document"])
        self.resolved: dict[str, Any] = json.loads(r["resolved"])
        self.notes: list[str] = list(r["notes"])

    def replace(self, **overrides: Any) -> "Config":
        """A new Config: this one with more overrides (e.g. an OutOfMemory's advice)."""
        return Config(self, **overrides)

    def __getitem__(self, key: str) -> Any:
        """The resolved value of a dotted key: ``cfg["strata.model.n_layer"]``."""
        node: Any = self.resolved
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise KeyError(key)
            node = node[part]
        return node

    def to_dict(self) -> dict[str, Any]:
        """Every key with its resolved value (a copy)."""
        return json.loads(json.dumps(self.resolved))

    def save(self, path: str | os.PathLike[str]) -> str:
        """Writes the document (as given, overrides applied) as JSON; returns the path."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.document, f, indent=2)
            f.write("\n")
        return os.fspath(path)

    def _text(self) -> str:
        return json.dumps(self.document)

    def __repr__(self) -> str:
        m = self["strata.model"]
        return (f"Config({self.source!r}: GPT {m['n_layer']} layers, d={m['n_embd']}, "
                f"ZeRO stage {self['zero_optimization.stage']}, "
                f"{self['strata.train_steps']} steps)")


def as_config(config: ConfigSource, overrides: dict[str, Any]) -> Config:
    """``config`` as a Config with ``overrides`` applied (itself when it is one and there are none)."""
    if isinstance(config, Config) and not overrides:
        return config
    return Config(config, **overrides)
