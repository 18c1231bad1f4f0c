"""strata.data (text, strings, token ids; bytes or GPT-2's BPE) and strata.ckpt (Hugging Face
import, fine-tuning from it, export that transformers loads, verify)."""

from __future__ import annotations

import pytest

import strata
from conftest import FIXTURES

HF = FIXTURES / "hf_gpt2_tiny"
BPE = FIXTURES / "bpe_tiny"


def test_prepare_text_strings_and_tokens(tmp_path) -> None:
    d = strata.data.prepare(tmp_path / "s", text=["hello ", "world"] * 50, val_fraction=0.2)
    assert (d.train_tokens, d.valid_tokens, d.vocab_size) == (440, 110, 256)
    t = strata.data.prepare(tmp_path / "t", tokens=list(range(64)) * 10, vocab_size=64)
    assert t.vocab_size == 64 and t.train_tokens + t.valid_tokens == 640
    assert t.overrides() == {"strata.data.train": t.train, "strata.data.valid": t.valid}


def test_gpt2_tokenizer_matches_the_reference(tmp_path) -> None:
    tok = strata.data.Tokenizer.gpt2(BPE / "vocab.json", BPE / "merges.txt")
    text = (BPE / "text.txt").read_bytes().decode("utf-8")
    ids = [int(x) for x in (BPE / "ids.txt").read_text().split()]
    assert tok.encode(text) == ids and tok.decode(ids) == text
    d = strata.data.prepare(tmp_path / "b", files=BPE / "text.txt", tokenizer=tok, val_fraction=0)
    assert d.train_tokens == len(ids) and d.vocab_size == tok.vocab_size


def test_prepare_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        strata.data.prepare(tmp_path / "x")
    with pytest.raises(ValueError, match="vocab_size"):
        strata.data.prepare(tmp_path / "x", tokens=[1, 2])
    with pytest.raises(strata.StrataError) as e:
        strata.data.prepare(tmp_path / "x", files=tmp_path / "missing.txt")
    assert "missing.txt" in str(e.value) and "\n" not in str(e.value)


def hf_config(tokens: strata.data.Prepared, **overrides: object) -> strata.Config:
    doc = {"train_micro_batch_size_per_gpu": 2,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
           "strata": {"seed": 3, "train_steps": 2,
                      "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 16, "vocab_size": 64},
                      "data": {"train": tokens.train}}}
    return strata.Config(doc, **overrides)


def test_import_finetune_export_verify(small_tokens, tmp_path) -> None:
    step0 = strata.ckpt.import_hf(HF, tmp_path / "imported")
    assert step0.endswith("step_00000000") and strata.ckpt.verify(step0)
    cfg = hf_config(small_tokens, **{"strata.checkpoint.dir": str(tmp_path / "ck")})
    run = strata.train(cfg, init_from=str(HF), save_initial=True, progress=False)
    assert run.step == 2
    # The step-0 weights are the fixture's, bit for bit: their export equals the fixture's export.
    a = strata.ckpt.export_hf(tmp_path / "ck" / "step_00000000", tmp_path / "a")
    b = strata.ckpt.export_hf(step0, tmp_path / "b")
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    out = strata.ckpt.export_hf(run.checkpoint, tmp_path / "hf")
    assert (tmp_path / "hf" / "config.json").exists() and a and b and out
    h5 = strata.ckpt.export_h5(run.checkpoint, tmp_path / "w.h5")
    assert h5.endswith("w.h5")
    # A damaged rank file fails verification.
    rank_file = next((tmp_path / "ck" / "step_00000002").glob("*.h5"))
    data = bytearray(rank_file.read_bytes())
    for at in range(0, len(data), 4096):
        data[at] ^= 0xFF
    rank_file.write_bytes(bytes(data))
    report = strata.ckpt.verify(tmp_path / "ck" / "step_00000002")
    assert not report and report.faults


def test_export_loads_in_transformers(small_tokens, tmp_path) -> None:
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (pip install transformers torch)")
    import torch

    cfg = hf_config(small_tokens, **{"strata.checkpoint.dir": str(tmp_path / "ck")})
    run = strata.train(cfg, init_from=str(HF), progress=False)
    strata.ckpt.export_hf(run.checkpoint, tmp_path / "hf")
    model = transformers.GPT2LMHeadModel.from_pretrained(str(tmp_path / "hf"))
    ids = [1, 5, 9, 2]
    logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, 4, 64)
    # The model transformers loaded predicts what Strata's model predicts (greedy, one token).
    assert int(logits[0, -1].argmax()) == run.generate(ids, 1, temperature=0)[0]
