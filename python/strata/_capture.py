"""C++'s console lines where Python's go: in a notebook (or anywhere sys.stdout is not the
process's standard output) what the library prints to file descriptor 1 is forwarded to
sys.stdout while a call runs, so the plan, the summary and the resume lines show in the cell."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from . import _strata


@contextmanager
def forward_c_output() -> Iterator[None]:
    if sys.stdout is sys.__stdout__:
        yield  # C's output lands where Python's does already
        return
    sys.stdout.flush()
    _strata.flush()
    saved = os.dup(1)
    read, write = os.pipe()
    os.dup2(write, 1)
    os.close(write)

    def pump() -> None:
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        yield
    finally:
        _strata.flush()
        os.dup2(saved, 1)  # closes the pipe's last write end: the reader sees its end
        os.close(saved)
        reader.join()
