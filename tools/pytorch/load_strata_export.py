"""Move weights between Strata checkpoints and PyTorch, through one consolidated HDF5 file.

`strata ckpt export DIR --output model.h5` writes every parameter as an fp32 dataset named by its
PyTorch/nanoGPT name (e.g. "transformer.h.0.attn.c_attn.weight") with its full shape; the root
attributes hold the step, the training config and the model's shape ("model", JSON). Loading it
into the reference GPT (tools/pytorch/gpt_model.py):

    import sys; sys.path.insert(0, "tools/pytorch")
    from gpt_model import GPT
    from load_strata_export import gpt_config, load_state_dict
    model = GPT(gpt_config("model.h5"))
    model.load_state_dict(load_state_dict("model.h5"))

The other way, for fine-tuning weights trained elsewhere with Strata:

    save_strata_export(model, "pretrained.h5")      # then: strata ckpt import pretrained.h5 --output ckpt/

Needs only h5py, numpy and torch (not Strata).
"""
import json

import h5py
import numpy as np
import torch

EXPORT_FORMAT = "strata-export"
# nanoGPT ties the LM head to the token embedding; Strata stores the weight once.
TIED = {"lm_head.weight": "transformer.wte.weight"}


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def read_export(path):
    """(arrays, attributes): every float dataset as a float32 numpy array by dotted name, and the
    root attributes (JSON-decoded where they are JSON text)."""
    arrays = {}
    with h5py.File(path, "r") as f:
        attrs = {}
        for key, value in f.attrs.items():
            if isinstance(value, (bytes, str)):
                value = _text(value)
                if key in ("config", "model"):
                    value = json.loads(value)
            elif isinstance(value, np.generic):
                value = value.item()
            attrs[key] = value

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
                arrays[name.replace("/", ".")] = np.asarray(obj[()], dtype=np.float32)

        f.visititems(visit)
    if attrs.get("format") not in (None, EXPORT_FORMAT):
        raise ValueError(f"{path}: format is {attrs.get('format')!r}, expected {EXPORT_FORMAT!r}")
    return arrays, attrs


def load_state_dict(path, tied=TIED):
    """A state dict of torch tensors for model.load_state_dict(); tied weights (lm_head.weight)
    are filled in from the tensor they are tied to."""
    arrays, _ = read_export(path)
    state = {name: torch.from_numpy(a) for name, a in arrays.items()}
    for alias, source in tied.items():
        if alias not in state and source in state:
            state[alias] = state[source]
    return state


def gpt_config(path, **overrides):
    """GPTConfig for the exported model: from the export's "model" attribute, else inferred from
    shapes (n_head cannot be inferred: pass n_head=... then)."""
    from gpt_model import GPTConfig

    arrays, attrs = read_export(path)
    model = attrs.get("model") or {}
    wte = arrays["transformer.wte.weight"]
    wpe = arrays["transformer.wpe.weight"]
    n_layer = len({k.split(".")[2] for k in arrays if k.startswith("transformer.h.")})
    values = dict(vocab_size=wte.shape[0], n_embd=wte.shape[1], block_size=wpe.shape[0], n_layer=n_layer)
    for key in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
        if key in model:
            values[key] = int(model[key])
    values.update(overrides)
    if "n_head" not in values:
        raise ValueError(f"{path}: no 'model' attribute with n_head; pass gpt_config(path, n_head=...)")
    return GPTConfig(**values)


def save_strata_export(model_or_state, path, model_config=None, tied=TIED):
    """Writes a model's (or state dict's) float weights as a file `strata ckpt import` accepts;
    a tied alias (lm_head.weight) is left out when it equals its source."""
    state = model_or_state.state_dict() if hasattr(model_or_state, "state_dict") else dict(model_or_state)
    if model_config is None and hasattr(model_or_state, "config"):
        c = model_or_state.config
        model_config = {k: getattr(c, k) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")}
    with h5py.File(path, "w", track_order=True) as f:
        f.attrs["format"] = EXPORT_FORMAT
        f.attrs["format_version"] = 1
        f.attrs["step"] = 0
        if model_config is not None:
            f.attrs["model"] = json.dumps(model_config)
            f.attrs["config"] = json.dumps({"strata": {"model": model_config}})
        for name, tensor in state.items():
            if not torch.is_floating_point(tensor):
                continue
            source = tied.get(name)
            if source in state and torch.equal(tensor, state[source]):
                continue
            f.create_dataset(name, data=tensor.detach().to(torch.float32).cpu().numpy())
