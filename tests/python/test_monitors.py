"""DeepSpeed's tensorboard and csv_monitor blocks act: the event file read back by TensorBoard's
own reader (where the tensorboard package is installed) and by the project's reader (always),
each value the run's metrics; the CSV files in DeepSpeed's layout."""

from __future__ import annotations

import csv
import glob

import pytest

import strata
from strata import _strata
from conftest import tiny


def monitored(corpus, tmp_path) -> strata.Run:
    return strata.train(tiny(corpus, **{
        "tensorboard": {"enabled": True, "output_path": str(tmp_path / "tb"), "job_name": "job"},
        "csv_monitor": {"enabled": True, "output_path": str(tmp_path / "csv"), "job_name": "job"},
    }), progress=False)


def test_tensorboard_event_file_with_the_projects_reader(corpus, tmp_path) -> None:
    run = monitored(corpus, tmp_path)
    (path,) = glob.glob(str(tmp_path / "tb" / "job" / "events.out.tfevents.*"))
    events = _strata.read_tfevents(path)
    assert events[0]["file_version"] == "brain.Event:2"
    steps = events[1:]
    assert [e["step"] for e in steps] == [4, 8, 12, 16]  # samples: step × train_batch_size
    for e, r in zip(steps, run.records):
        s = e["scalars"]
        assert s["Train/Samples/train_loss"] == pytest.approx(r["loss"], rel=1e-6)
        assert s["Train/Samples/lr"] == pytest.approx(r["lr"], rel=1e-6)
        assert s["Train/Samples/grad_norm"] == pytest.approx(r["grad_norm"], rel=1e-6)
        assert s["Memory/device/peak_bytes"] == r["memory"]["device"]["total"]["peak"]
    assert "Train/Samples/val_loss" in steps[1]["scalars"]  # evaluated every 2 steps


def test_tensorboard_reads_it(corpus, tmp_path) -> None:
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="the tensorboard package is not installed (pip install tensorboard)")
    run = monitored(corpus, tmp_path)
    acc = accumulator.EventAccumulator(str(tmp_path / "tb" / "job"))
    acc.Reload()
    loss = acc.Scalars("Train/Samples/train_loss")
    assert [e.step for e in loss] == [4, 8, 12, 16]
    assert [e.value for e in loss] == pytest.approx([r["loss"] for r in run.records], rel=1e-6)
    assert "Memory/device/peak_bytes" in acc.Tags()["scalars"]


def test_csv_in_deepspeeds_layout(corpus, tmp_path) -> None:
    run = monitored(corpus, tmp_path)
    with open(tmp_path / "csv" / "job" / "Train_Samples_train_loss.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "train_loss"]
    assert [int(r[0]) for r in rows[1:]] == [4, 8, 12, 16]
    assert [float(r[1]) for r in rows[1:]] == [r["loss"] for r in run.records]


def test_wandb_is_a_one_line_error() -> None:
    with pytest.raises(strata.ConfigError) as e:
        strata.Config({"train_micro_batch_size_per_gpu": 2, "wandb": {"enabled": True}})
    assert len(e.value.problems) == 1 and "network" in e.value.problems[0]
