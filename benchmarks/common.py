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


def native_reducer() -> bool:
    """Whether ``BENCH_REDUCER=native`` asks for the reduces in the native core (``python``,
    the default, keeps the Python reducer)."""
    choice = os.environ.get("BENCH_REDUCER", "python")
    if choice not in ("python", "native"):
        raise SystemExit(f"BENCH_REDUCER={choice!r}: expected 'python' or 'native'")
    return choice == "native"


def loop_regions() -> bool:
    """Whether ``BENCH_REGIONS=1`` asks for the loops run whole in the native core
    (``LocalSettings(regions=True)``; ``0``, the default, keeps them Python operators)."""
    choice = os.environ.get("BENCH_REGIONS", "0")
    if choice not in ("0", "1"):
        raise SystemExit(f"BENCH_REGIONS={choice!r}: expected '0' or '1'")
    return choice == "1"


def runtime() -> Any:
    """The runtime of the reducer ``BENCH_REDUCER`` names and the loops ``BENCH_REGIONS``
    asks for (``None``: the default)."""
    import ddflow as dd
    from ddflow.runtime.local.settings import LocalSettings, ReduceSettings

    if not native_reducer() and not loop_regions():
        return None
    return dd.LocalRuntime(
        LocalSettings(reduce=ReduceSettings(native=native_reducer()), regions=loop_regions())
    )


def dataflow(workers: int = 1) -> Any:
    """A ``dd.Dataflow`` of ``workers``, with the reducer ``BENCH_REDUCER`` names and the
    loops ``BENCH_REGIONS`` asks for."""
    import ddflow as dd

    return dd.Dataflow(runtime(), workers=workers)


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
