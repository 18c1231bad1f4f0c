"""strata.train: the same losses as train_gpt bit for bit, metrics, interrupt (finish the step,
save, return) and a bitwise resume, sampling, plots, the device choice printed once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

import strata
from conftest import executable, tiny

train_module = sys.modules["strata._train"]


def test_losses_equal_train_gpts_bitwise(corpus, tmp_path) -> None:
    cfg = tiny(corpus)
    run = strata.train(cfg, progress=False)
    path = tmp_path / "c.json"
    cfg.save(path)
    subprocess.run([executable("train_gpt"), "--config", str(path), "--metrics",
                    str(tmp_path / "m.jsonl"), "--threads", "2"], check=True, capture_output=True,
                   env={**os.environ, "OMP_NUM_THREADS": "2"})
    ref = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert len(run.records) == len(ref) == 4
    for mine, theirs in zip(run.records, ref):
        for key in ("loss", "grad_norm", "lr", "val_loss"):
            assert mine.get(key) == theirs.get(key), (key, mine["step"])
    assert run.step == 4 and not run.interrupted


def test_metrics_checkpoint_memory_plot(corpus, tmp_path) -> None:
    run = strata.train(tiny(corpus, **{"strata.checkpoint.dir": str(tmp_path / "ck")}),
                       metrics=str(tmp_path / "m.jsonl"), progress=False)
    assert run.checkpoint == str(tmp_path / "ck" / "step_00000004")
    assert strata.ckpt.verify(run.checkpoint)
    assert "peak memory" in run.memory and "planned" in run.memory
    written = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert written == run.records
    try:
        import pandas  # noqa: F401
    except ImportError:
        assert run.metrics == run.records
    else:
        assert list(run.metrics["step"]) == [1, 2, 3, 4]
        assert "memory.device.total.peak" in run.metrics.columns
    pytest.importorskip("matplotlib")
    fig = run.plot(str(tmp_path / "run.png"))
    assert (tmp_path / "run.png").stat().st_size > 0 and len(fig.axes) == 4


def interrupt_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Ctrl-C as a person sends it, while the given step's progress is shown."""
    update = train_module.Progress.update

    def update_then_interrupt(self, metrics, line, print_due):  # type: ignore[no-untyped-def]
        update(self, metrics, line, print_due)
        if metrics["step"] == step:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(train_module.Progress, "update", update_then_interrupt)


def test_interrupt_saves_and_resume_is_bitwise(corpus, tmp_path, monkeypatch) -> None:
    whole = strata.train(tiny(corpus), progress=False)
    cfg = tiny(corpus, **{"strata.checkpoint.dir": str(tmp_path / "ck")})
    interrupt_at(monkeypatch, 2)
    first = strata.train(cfg, progress=True)
    monkeypatch.undo()
    assert first.interrupted and first.step == 2 and len(first.records) == 2
    assert first.checkpoint == str(tmp_path / "ck" / "step_00000002")
    second = strata.train(cfg, progress=False)  # resumes (strata.checkpoint.resume "auto")
    assert [r["step"] for r in second.records] == [3, 4]
    assert [r["loss"] for r in first.records + second.records] == [r["loss"] for r in whole.records]


def test_generate(corpus) -> None:
    run = strata.train(tiny(corpus, **{"strata.train_steps": 1}), progress=False)
    text = run.generate("Hello", 20, seed=3)
    assert isinstance(text, str) and text == run.generate("Hello", 20, seed=3)
    ids = run.generate([72, 101], 5, temperature=0)
    assert isinstance(ids, list) and len(ids) == 5 and all(0 <= t < 256 for t in ids)
    with pytest.raises(strata.StrataError, match="outside the vocabulary"):
        run.generate([300], 2)
    run.close()
    with pytest.raises(RuntimeError, match="no longer holds its model"):
        run.generate("x", 1)


def test_auto_device_is_noted_once(corpus, capfd, no_gpu) -> None:
    strata.train(tiny(corpus, **{"strata.train_steps": 1}), progress=False)
    out = capfd.readouterr().out
    assert out.count('strata.device "auto": the CPU') == 1


def test_cuda_without_gpu_is_a_one_line_error(corpus, no_gpu) -> None:
    with pytest.raises(strata.StrataError) as e:
        strata.train(tiny(corpus, **{"strata.device": "cuda"}), progress=False)
    assert 'strata.device is "cuda"' in str(e.value) and "\n" not in str(e.value)


def test_bad_input_is_one_line(tmp_path, corpus) -> None:
    with pytest.raises(strata.StrataError) as e:
        strata.train(tiny(corpus, **{"strata.data.train": str(tmp_path / "none.tok")}), progress=False)
    assert "none.tok" in str(e.value) and "\n" not in str(e.value)
