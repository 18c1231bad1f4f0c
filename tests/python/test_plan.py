"""strata.plan: the planner's numbers (the same JSON as `strata plan --json`), the notebook
table, and a recommendation that, passed back to Config, fits."""

from __future__ import annotations

import json
import subprocess

import strata
from conftest import ROOT, executable

QUICK = ROOT / "examples" / "gpt" / "configs" / "quickstart.json"


def test_plan_is_strata_plans() -> None:
    p = strata.plan(QUICK, device_memory="30MiB", ranks=2, recommend=False,
                    zero_optimization__stage=2)
    cli = subprocess.run([executable("strata"), "plan", "--config", str(QUICK), "--ranks", "2",
                          "--set", "zero_optimization.stage=2", "--device-memory", "30MiB", "--json"],
                         capture_output=True, text=True, check=True)
    want = json.loads(cli.stdout)
    assert p.peak == want["peak"] and p.by_category == want["by_category"]
    assert p.fits is False and want["fits"] is False
    assert p.peak["device"] == 82046112
    assert "does NOT fit the caps" in str(p)


def test_table_in_a_notebook_and_text_elsewhere() -> None:
    p = strata.plan(QUICK, device_memory="15GiB")
    page = p._repr_html_()
    assert "<table>" in page and "activations" in page and "69.29 MiB" in page
    assert "fits" in page
    assert "device" in repr(p) and "82.14 MiB" in str(p)


def test_recommendation_followed_fits() -> None:
    cfg = strata.Config(QUICK)
    p = strata.plan(cfg, device_memory="12MiB")
    assert not p.fits
    rec = p.recommendation
    assert rec is not None and rec["zero_optimization.offload_optimizer.device"] == "cpu"
    assert "<code>" in p._repr_html_()
    follow = strata.plan(cfg.replace(**rec), device_memory="12MiB")
    assert follow.fits
