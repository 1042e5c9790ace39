"""A time budget for a test's run of a dataflow: a run that does not finish in time (a loop
that never quiesces) fails the test instead of hanging it.

>>> with time_budget(5.0, "a quick block"):
...     pass
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NonTermination", "time_budget"]


class NonTermination(AssertionError):
    """A run did not finish within its time budget (e.g. a loop that never quiesces)."""


@contextmanager
def time_budget(seconds: float, what: str) -> Iterator[None]:
    """Fail with :class:`NonTermination` if the block runs longer than ``seconds`` (on the main
    thread, where a signal can interrupt it; elsewhere the block runs unguarded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise NonTermination(f"{what} did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
