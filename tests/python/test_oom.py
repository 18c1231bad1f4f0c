"""strata.OutOfMemory: the ledger's breakdown and the planner's advice as data; the first advice,
passed back to Config literally, fits."""

from __future__ import annotations

import pytest

import strata
from conftest import tiny


def test_advice_followed_literally_fits(corpus) -> None:
    cfg = tiny(corpus, **{"strata.memory.device_limit": "1MiB", "strata.train_steps": 1})
    with pytest.raises(strata.OutOfMemory) as e:
        strata.train(cfg, progress=False)
    oom = e.value
    assert oom.tier == "device" and oom.cap == 1 << 20
    assert oom.step_needs is not None and oom.step_needs > oom.cap
    assert oom.advice and all(isinstance(a, strata.Change) for a in oom.advice)
    assert "to make it fit" in str(oom)
    first = oom.advice[0]
    assert len(first) > 0, first.text
    run = strata.train(strata.Config(cfg, **first), progress=False)
    assert run.step == 1
