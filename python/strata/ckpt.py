"""Checkpoints: Hugging Face GPT-2 import and export, HDF5 export, verification
(``strata ckpt``; docs/huggingface.md, docs/checkpoint-format.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Union

from . import _strata

PathLike = Union[str, "os.PathLike[str]"]


def import_hf(source: PathLike, output: PathLike, *, n_head: int | None = None) -> str:
    """Turns a Hugging Face GPT-2 (a directory with ``model.safetensors`` and ``config.json``, or
    a ``.safetensors`` file) or an HDF5 file of weights into a step-0 Strata checkpoint under
    ``output``; returns its step directory. ``n_head`` when no config.json says it."""
    r = _strata.import_weights(os.fspath(source), os.fspath(output), n_head or 0, [])
    return r["step_dir"]


def export_hf(checkpoint: PathLike, output: PathLike, *, dtype: str = "f32",
              n_head: int | None = None) -> str:
    """Writes a checkpoint's weights as a Hugging Face GPT-2 directory (``model.safetensors`` +
    ``config.json``): ``transformers.GPT2LMHeadModel.from_pretrained(output)`` loads it.
    ``checkpoint`` is a checkpoint root (its newest step) or a step directory; ``dtype`` is
    ``"f32"``, ``"bf16"`` or ``"f16"``. Returns ``output``."""
    _strata.export_hf(os.fspath(checkpoint), os.fspath(output), dtype, n_head or 0)
    return os.fspath(output)


def export_h5(checkpoint: PathLike, output: PathLike) -> str:
    """Writes a checkpoint's weights as one fp32 HDF5 file under the PyTorch/nanoGPT names
    (``h5py`` reads it). Returns ``output``."""
    return _strata.export_h5(os.fspath(checkpoint), os.fspath(output))["output"]


@dataclass
class Verification:
    """What :func:`verify` found: ``ok`` (also the truth value), ``faults`` one line each."""

    step_dir: str
    ok: bool
    faults: list[str] = field(default_factory=list)
    files_checked: int = 0
    datasets_checked: int = 0
    bytes_checksummed: int = 0

    def __bool__(self) -> bool:
        return self.ok


def verify(checkpoint: PathLike, *, quick: bool = False) -> Verification:
    """Checks a checkpoint's completeness, sizes, self-descriptions and (unless ``quick``)
    every byte's checksum (``strata ckpt verify``)."""
    r = _strata.verify(os.fspath(checkpoint), quick)
    return Verification(r["step_dir"], r["ok"], list(r["faults"]), r["files_checked"],
                        r["datasets_checked"], r["bytes_checksummed"])
