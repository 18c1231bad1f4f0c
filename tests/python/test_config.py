"""strata.Config: DeepSpeed dicts as they are, overrides, every problem at once with the
command line's lines."""

from __future__ import annotations

import json
import subprocess

import pytest

import strata
from conftest import FIXTURES, ROOT, executable

MICRO = {"train_micro_batch_size_per_gpu": 2}
BAD = {"train_micro_batch_size_per_gpu": "x", "zero_optimization": {"stgae": 3}}


def test_deepspeed_dict_as_is() -> None:
    ds = json.loads((FIXTURES / "deepspeed_configs" / "transformers" / "tests" / "deepspeed" /
                     "ds_config_zero2.json").read_text())
    cfg = strata.Config(ds)
    assert cfg["zero_optimization.stage"] == 2
    assert cfg["zero_optimization.offload_optimizer.device"] == "cpu"
    assert any("auto" in n for n in cfg.notes)


def test_file_and_overrides() -> None:
    path = ROOT / "examples" / "gpt" / "configs" / "quickstart.json"
    cfg = strata.Config(path, zero_optimization__stage=1, **{"strata.train_steps": 7})
    assert cfg["zero_optimization.stage"] == 1
    assert cfg["strata.train_steps"] == 7
    assert cfg.source == str(path)
    again = cfg.replace(**{"strata.memory.device_limit": "2GiB"})
    assert again["strata.memory.device_limit"] == 2 << 30
    assert again["strata.train_steps"] == 7  # kept
    assert cfg["strata.memory.device_limit"] is None  # the original is unchanged


def test_every_problem_at_once_with_the_cli_lines(tmp_path) -> None:
    with pytest.raises(strata.ConfigError) as e:
        strata.Config(BAD)
    assert len(e.value.problems) == 2
    assert "did you mean 'zero_optimization.stage'" in str(e.value)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(BAD))
    with pytest.raises(strata.ConfigError) as from_file:
        strata.Config(path)
    cli = subprocess.run([executable("strata"), "config", "check", str(path)], capture_output=True,
                         text=True)
    assert cli.returncode == 1
    cli_lines = [line.removeprefix("strata: [config] ") for line in cli.stderr.splitlines()]
    assert from_file.value.problems == cli_lines


def test_bad_override_is_listed_with_the_rest() -> None:
    with pytest.raises(strata.ConfigError) as e:
        strata.Config(BAD, **{"strata.nope": 1})
    assert len(e.value.problems) == 3
    assert "unknown key 'strata.nope'" in e.value.problems[0]


def test_file_errors_are_one_line(tmp_path) -> None:
    (tmp_path / "syntax.json").write_text('{"a": 1,,}')
    with pytest.raises(strata.StrataError) as e:
        strata.Config(tmp_path / "syntax.json")
    assert "syntax.json:1:" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(strata.StrataError, match="cannot open config file"):
        strata.Config(tmp_path / "missing.json")
    with pytest.raises(TypeError):
        strata.Config(3)  # type: ignore[arg-type]


def test_device_defaults_to_auto() -> None:
    assert strata.Config(MICRO)["strata.device"] == "auto"
    assert strata.Config(MICRO, **{"strata.device": "cuda"})["strata.device"] == "cuda"
    with pytest.raises(strata.ConfigError, match='allowed: "auto", "cpu", "cuda"'):
        strata.Config(MICRO, **{"strata.device": "gpu"})


def test_save_round_trips(tmp_path) -> None:
    cfg = strata.Config({**MICRO, "strata": {"train_steps": 3}}, zero_optimization__stage=2)
    again = strata.Config(cfg.save(tmp_path / "c.json"))
    assert again.resolved == cfg.resolved
