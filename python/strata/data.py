"""Token files for training: text (bytes or GPT-2's byte-level BPE) or token arrays, split into a
train and a validation file (``strata data prepare``)."""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

from . import _strata

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Prepared:
    """What :func:`prepare` wrote: ``train`` and ``valid`` token files (paths for
    ``strata.data.train`` / ``strata.data.valid``), their token counts and the vocabulary size."""

    train: str
    valid: str
    train_tokens: int
    valid_tokens: int
    vocab_size: int

    def overrides(self) -> dict[str, str]:
        """``{"strata.data.train": ..., "strata.data.valid": ...}`` for :class:`strata.Config`."""
        return {"strata.data.train": self.train, "strata.data.valid": self.valid}


class Tokenizer:
    """GPT-2's byte-level BPE (``vocab.json`` + ``merges.txt``), or bytes (vocabulary 256)."""

    def __init__(self, vocab: PathLike | None = None, merges: PathLike | None = None) -> None:
        self.vocab = os.fspath(vocab) if vocab is not None else None
        self.merges = os.fspath(merges) if merges is not None else None
        self._bpe = (_strata.BpeTokenizer.load_gpt2(self.vocab, self.merges)
                     if self.vocab is not None and self.merges is not None else None)
        if (vocab is None) != (merges is None):
            raise ValueError("Tokenizer: give both vocab (vocab.json) and merges (merges.txt), or neither (bytes)")

    @classmethod
    def gpt2(cls, vocab: PathLike, merges: PathLike) -> "Tokenizer":
        """GPT-2's tokenizer from its ``vocab.json`` and ``merges.txt``."""
        return cls(vocab, merges)

    @property
    def vocab_size(self) -> int:
        return self._bpe.vocab_size if self._bpe is not None else 256

    def encode(self, text: str) -> list[int]:
        if self._bpe is None:
            return list(text.encode("utf-8"))
        return list(self._bpe.encode(text))

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids]
        raw = self._bpe.decode(ids) if self._bpe is not None else bytes(i & 0xFF for i in ids)
        return raw.decode("utf-8", errors="replace")


def prepare(output: PathLike, *, files: PathLike | Sequence[PathLike] | None = None,
            text: str | Sequence[str] | None = None, tokens: Sequence[int] | None = None,
            tokenizer: Tokenizer | None = None, vocab_size: int | None = None,
            val_fraction: float = 0.1) -> Prepared:
    """Writes ``<output>.train.tok`` and ``<output>.val.tok`` (``strata data prepare``).

    Give exactly one source:
        files: text files or directories, concatenated in sorted order;
        text: a string or strings (concatenated);
        tokens: token ids already (a list or a numpy array), with ``vocab_size``.

    Text is one token per byte (vocabulary 256) unless ``tokenizer`` is GPT-2's
    (:meth:`Tokenizer.gpt2`). The last ``val_fraction`` of the tokens go to the validation file.
    """
    given = [s is not None for s in (files, text, tokens)]
    if sum(given) != 1:
        raise ValueError("strata.data.prepare: give exactly one of files=, text= or tokens=")
    bpe = tokenizer is not None and tokenizer._bpe is not None
    kind, vocab, merges = ("gpt2", tokenizer.vocab, tokenizer.merges) if bpe else ("", "", "")  # type: ignore[union-attr]
    out = os.fspath(output)
    with tempfile.TemporaryDirectory(prefix="strata-prepare-") as tmp:
        dtype, size = "", 0
        if files is not None:
            inputs = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else [os.fspath(f) for f in files]
        elif text is not None:
            path = os.path.join(tmp, "text.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text if isinstance(text, str) else "".join(text))
            inputs = [path]
        else:
            if tokenizer is not None:
                raise ValueError("strata.data.prepare: tokens= are tokenised already; leave out tokenizer=")
            if vocab_size is None:
                raise ValueError("strata.data.prepare: tokens= needs vocab_size=")
            ids = [int(t) for t in tokens]  # type: ignore[union-attr]
            dtype, size = ("u16", vocab_size) if vocab_size <= 65536 else ("u32", vocab_size)
            path = os.path.join(tmp, "tokens.bin")
            with open(path, "wb") as f:
                f.write(struct.pack(f"<{len(ids)}{'H' if dtype == 'u16' else 'I'}", *ids))
            inputs = [path]
        if vocab_size is not None and tokens is None:
            raise ValueError("strata.data.prepare: vocab_size= is for tokens=; text's vocabulary is "
                             "256 (bytes) or the tokenizer's")
        r = _strata.prepare(inputs, out, val_fraction, dtype, size, kind, vocab or "", merges or "")
    return Prepared(r["train"], r["valid"], r["train_tokens"], r["valid_tokens"], r["vocab_size"])
