#!/usr/bin/env python3
"""Writes tests/fixtures/bpe_tiny/: a small byte-level BPE in GPT-2's file format and the ids the
reference tokenizers give a test text; `strata data prepare --tokenizer gpt2` must give the same.

Made once, with PyPI's tokenizers and transformers in a virtual environment (no PyTorch needed):

    python3 -m venv --system-site-packages /tmp/hf && \\
      /tmp/hf/bin/pip install "transformers==4.44.2" "tokenizers<0.20"
    /tmp/hf/bin/python tools/pytorch/make_bpe_fixture.py

Files:
  vocab.json, merges.txt  trained here with tokenizers' ByteLevelBPETokenizer (GPT-2's byte-to-
                          unicode alphabet, GPT-2's pre-tokenization regex), 512 tokens, the last
                          one "<|endoftext|>" as in GPT-2
  text.txt                the test text (UTF-8): ASCII, accents, CJK, emoji, numbers,
                          contractions, runs of spaces, tabs, CRLF and blank lines, Unicode spaces
  ids.txt                 its ids, one per line: what both tokenizers' Rust BPE and transformers'
                          pure-Python GPT2Tokenizer (GPT-2's original algorithm) give (they must
                          agree, or the script fails)
"""
import argparse
import json
import os
import shutil
import tempfile

from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Tokenizer

TRAIN = """The quick brown fox jumps over the lazy dog. It's the dog's day; they're sure we've
won, I'm told, and you'll see it'd rain. Numbers: 12345 67890 3.14159 2024-11-23 1,000,000.
Café déjà vu, naïve façade, Straße, smörgåsbord, crème brûlée — «guillemets» “quotes”.
東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.
Emoji: 🙂 🚀 👍🏽 ❤️ and symbols ©®™ ±×÷ → ⇒ ∞.
    indented code()  {  return x  +  y;  }
Tabs\there\tand\tthere; multiple   spaces   between   words.
""" * 20

TEXT = (
    "Hello world! It's a test: we're sure they've won, I'm told you'll see it'd work.\n"
    "IT'S LOUD; Don'T mix 'cases'.\n"
    "Numbers 12345, 3.14159 and 2024-11-23; 1000000 vs 1,000,000 and ٣٤٥ (Arabic-Indic).\n"
    "Café déjà vu: naïve façade, Straße, smörgåsbord — crème brûlée.\n"
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.\n"
    "Emoji 🙂🚀 👍🏽 ❤️ family 👨‍👩‍👧 flags 🇫🇷.\n"
    "    four leading spaces,   three inside,\ttab,\t\ttwo tabs, trailing spaces   \n"
    "\n\n"
    "CRLF line\r\nnext line\r\n"
    "no-break\u00a0space, ideographic\u3000space, line\u2028separator, em\u2003space\n"
    "mixedUP CamelCase snake_case kebab-case URL https://example.org/a?b=c&d=e#f\n"
    "unseen words: zyzzyva quixotic xylophone 🦄\n"
    "   \n"
    "end without newline   "
)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.normpath(
        os.path.join(here, "..", "..", "tests", "fixtures", "bpe_tiny")))
    args = ap.parse_args()

    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "train.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write(TRAIN)
        tok.train([corpus], vocab_size=511, min_frequency=2, show_progress=False)
        tok.add_special_tokens(["<|endoftext|>"])  # the last id, as in GPT-2
        if os.path.isdir(args.out):
            shutil.rmtree(args.out)
        os.makedirs(args.out)
        tok.save_model(args.out)
    vocab_path, merges_path = (os.path.join(args.out, n) for n in ("vocab.json", "merges.txt"))
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    if "<|endoftext|>" not in vocab:  # save_model writes the trained vocabulary only
        vocab["<|endoftext|>"] = max(vocab.values()) + 1
        with open(vocab_path, "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)

    fast = ByteLevelBPETokenizer(vocab_path, merges_path, add_prefix_space=False)
    ids_fast = fast.encode(TEXT).ids
    slow = GPT2Tokenizer(vocab_path, merges_path)
    ids_slow = slow.encode(TEXT)
    if ids_fast != ids_slow:
        first = next(i for i, (a, b) in enumerate(zip(ids_fast, ids_slow)) if a != b)
        raise SystemExit(f"tokenizers and GPT2Tokenizer disagree at token {first}")
    if slow.decode(ids_slow) != TEXT:
        raise SystemExit("the ids do not decode back to the text")

    with open(os.path.join(args.out, "text.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(TEXT)
    with open(os.path.join(args.out, "ids.txt"), "w") as f:
        f.write("".join(f"{i}\n" for i in ids_slow))
    import tokenizers, transformers  # noqa: E401
    print(f"wrote {args.out}: vocabulary {len(vocab)}, {len(ids_slow)} ids for "
          f"{len(TEXT.encode())} bytes; tokenizers {tokenizers.__version__}, "
          f"transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
