"""Shared measurement helpers: timing, medians, peak memory, machine facts."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def timed(fn: Callable[[], Any]) -> float:
    """Seconds taken by ``fn()``."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def summary(seconds: list[float]) -> dict[str, float]:
    """Median and max in milliseconds."""
    ms = [s * 1e3 for s in seconds]
    return {
        "median_ms": round(statistics.median(ms), 3),
        "max_ms": round(max(ms), 3),
        "runs": len(ms),
    }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
