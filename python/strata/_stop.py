"""Stopping a run between steps: Ctrl-C (a notebook's "interrupt") asks the run to stop after
the step in flight, which it finishes and saves, instead of raising in the middle of it."""

from __future__ import annotations

import signal
import threading
from types import FrameType


class StopRequest:
    """While active, SIGINT sets ``requested`` instead of raising KeyboardInterrupt (main thread
    only; elsewhere KeyboardInterrupt is caught between steps by the caller)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: object = None

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
