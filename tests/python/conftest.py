"""Shared fixtures of the Python package's tests (run by scripts/test with the package installed
in a fresh virtual environment; tests/python/README.md).

$STRATA_BUILD (default build/release) is the CMake build whose `strata` and `train_gpt` the tests
compare the package with."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import strata

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = Path("/usr/share/games/fortunes")


def build_dir() -> Path:
    return Path(os.environ.get("STRATA_BUILD", ROOT / "build" / "release"))


def executable(name: str) -> str:
    """A program of the CMake build (`strata`, `train_gpt`); the test fails without it."""
    path = build_dir() / {"strata": "launcher/strata", "train_gpt": "examples/train_gpt"}[name]
    if not path.exists():
        pytest.fail(f"{path} is missing: build it (scripts/build release) or set STRATA_BUILD")
    return str(path)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> strata.data.Prepared:
    """Token files from the fortunes corpus (bytes, vocabulary 256)."""
    out = tmp_path_factory.mktemp("corpus") / "fortunes"
    return strata.data.prepare(out, files=str(CORPUS))


@pytest.fixture(scope="session")
def small_tokens(tmp_path_factory: pytest.TempPathFactory) -> strata.data.Prepared:
    """Random tokens below 64: the vocabulary of the Hugging Face fixture (hf_gpt2_tiny)."""
    import random

    r = random.Random(5)
    out = tmp_path_factory.mktemp("tokens") / "tok"
    return strata.data.prepare(out, tokens=[r.randrange(64) for _ in range(3000)], vocab_size=64)


def tiny(corpus: strata.data.Prepared, **overrides: object) -> strata.Config:
    """A small, fast GPT on the corpus: 2 layers, d=64, T=32, micro-batch 4."""
    doc = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_clipping": 1.0,
        "steps_per_print": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
        "strata": {
            "seed": 7,
            "train_steps": 4,
            "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 32, "vocab_size": 256},
            "data": {"train": corpus.train, "valid": corpus.valid},
            "eval": {"interval": 2, "iters": 2},
        },
    }
    return strata.Config(doc, **overrides)


@pytest.fixture
def no_gpu() -> None:
    if strata.device() != "cpu":
        pytest.skip(f"a GPU is usable here ({strata.device()}): the test is about machines without one")


def which(program: str) -> str | None:
    return shutil.which(program)
