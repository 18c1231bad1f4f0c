"""Strata for notebooks: train models that do not fit, from Python.

A thin layer over Strata's C++ library (the same code as ``train_gpt`` and the ``strata``
command), speaking DeepSpeed's JSON config and Hugging Face's names::

    import strata
    cfg = strata.Config("examples/gpt/configs/quickstart.json", **{"strata.train_steps": 50})
    strata.plan(cfg, device_memory="15GiB")        # each tier's peak, whether it fits
    run = strata.train(cfg)                        # progress bar; Ctrl-C stops and saves
    run.plot(); run.generate("Hello")

Modules: :mod:`strata.data` (token files), :mod:`strata.ckpt` (Hugging Face import/export,
verify). Errors: :class:`ConfigError`, :class:`OutOfMemory` (with its advice as data),
:class:`StrataError`.
"""

from __future__ import annotations

from . import _strata, ckpt, data
from .config import Config
from .errors import Change, ConfigError, OutOfMemory, StrataError
from ._plan import Plan, plan
from .run import Run
from ._train import train

__all__ = ["Change", "Config", "ConfigError", "OutOfMemory", "Plan", "Run", "StrataError",
           "ckpt", "data", "device", "plan", "train"]


def device() -> str:
    """The device a job with ``strata.device: "auto"`` (the default) uses here: ``"cuda:0"``
    when a GPU is usable, else ``"cpu"``."""
    return _strata.auto_device()
