"""examples/notebooks/gpt2_colab.ipynb runs end to end headless, at the CPU size, in a real Jupyter
kernel: its cells up to "Resume" in one kernel, the rest in a new kernel (a kernel restart), so
the resume cell cannot lean on anything but the files the first part left."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT

NOTEBOOK = ROOT / "examples" / "notebooks" / "gpt2_colab.ipynb"


def test_notebook_runs_and_resumes_after_a_restart(tmp_path, monkeypatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # A kernel of this interpreter (the virtual environment the package is installed in).
    spec = tmp_path / "jupyter" / "kernels" / "strata-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "strata-test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("STRATA_CHECKOUT", str(ROOT))
    monkeypatch.setenv("STRATA_NOTEBOOK_DIR", str(tmp_path / "work"))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cut = next(i for i, c in enumerate(nb.cells) if "kernel-restart" in c.metadata.get("tags", []))
    outputs = []
    for cells in (nb.cells[:cut], nb.cells[cut:]):
        part = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
        nbclient.NotebookClient(part, timeout=600, kernel_name="strata-test",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
        outputs += [o for c in part.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "\n".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    shown = "\n".join(json.dumps(o.get("data", {})) for o in outputs if "data" in o)
    assert "Strata computes on: cpu" in text or "Strata computes on: cuda" in text
    assert "<table>" in shown                             # the plan, as a table
    assert "image/png" in shown                           # the plot, inline
    assert "init-from: weights of" in text                # trained from the Hugging Face weights
    assert "resumed at step 7 -> 12" in text              # after the restart, from step 6's checkpoint
    assert "model.safetensors" in text and "True" in text  # exported, verified
    assert (tmp_path / "work" / "hf" / "config.json").exists()
