"""The demo: SCCs and top tags of a day of mentions sliding by the minute, against NetworkX.

The stream is :func:`ddflow.demo.data.mention_stream` with its default seed and sizes, 48 hours
(``--quick``: 30 hours of a world a tenth the size, a tenth of the users, broadcasters and
mentions per hour). :class:`ddflow.demo.model.WindowModel` holds a window of 24 hours,
``[end - 86400, end)``, first ending at the 24-hour mark: building it loads that window as one
epoch (``first_result_s``). The window then moves forward by one minute, N times (20;
``--quick``: 5): a minute's mentions enter it and a minute's leave it. The model times each
step (``ddflow_step``: from the window's move until its epoch is complete); then
:func:`ddflow.demo.oracle.recompute` computes the same window from scratch with NetworkX
(``networkx_recompute``: the graph built, its components found, their top tags counted), and
``recompute_over_step`` is its median over ddflow's (above 1: ddflow is faster).

Also reported: ``stream`` (its knobs, ``mentions``, ``users``, ``generate_s``),
``first_window`` (edges, components of two nodes or more, the largest's size),
``window_edges_median``, ``components_median``, and per step in ``steps`` the window's edges,
the mentions that ``entered`` and ``left`` it, its components and largest, and both times.

After the first window and every step the model's components (sizes, nodes and top tags, in
order) must equal the recomputation, or the run fails (:class:`ResultMismatch`); the JSON says
``"result_checked": true``.
"""

from __future__ import annotations

import gc
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import polars as pl

from benchmarks.common import loop_regions, machine, native_reducer, peak_rss_mb, runtime, summary

T = TypeVar("T")

DAY = 86_400
MINUTE = 60
#: ``--quick``'s stream: a world this fraction of the default's size (users, broadcasters and
#: mentions per hour), so that the run takes seconds rather than minutes
QUICK_SCALE = 0.1


class ResultMismatch(AssertionError):
    """ddflow's components differ from NetworkX recomputing the window."""


def timed_call(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds taken by ``fn()``, and its result."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def normal(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Components with plain Python values (ints, lists, strs), in their order."""
    return [
        {
            "size": int(c["size"]),
            "nodes": [int(n) for n in c["nodes"]],
            "top_tags": [str(t) for t in c["top_tags"]],
        }
        for c in components
    ]


def check_components(got: list[dict[str, Any]], want: list[dict[str, Any]], end: int) -> None:
    """Raise :class:`ResultMismatch`, describing the first difference, unless the model's
    components ``got`` equal the recomputation's ``want`` for the window ending at ``end``."""
    got = normal(got)
    if got == want:
        return
    if len(got) != len(want):
        detail = f"{len(got)} components, NetworkX finds {len(want)}"
    else:
        i = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
        detail = f"component #{i} is {got[i]}, NetworkX finds {want[i]}"
    raise ResultMismatch(f"the window ending at {end}: ddflow has {detail}")


def measure(hours: float, steps: int, scale: float = 1.0) -> dict[str, Any]:
    from ddflow.demo.data import mention_stream
    from ddflow.demo.model import WindowModel
    from ddflow.demo.oracle import recompute, window_edges

    knobs: dict[str, float] = {"hours": hours}
    if scale != 1.0:  # (as many mentions per user, a world ``scale`` times the size)
        default = {k: p.default for k, p in inspect.signature(mention_stream).parameters.items()}
        knobs["rate"] = default["rate"] * scale
        knobs["users"] = round(default["users"] * scale)
        knobs["broadcasters"] = round(default["broadcasters"] * scale)
    generate_s, mentions = timed_call(lambda: mention_stream(**knobs))
    times = mentions["time"].to_numpy()
    first_result_s, model = timed_call(
        lambda: WindowModel(
            mentions, window=DAY, step=MINUTE, end=DAY, recompute=False, runtime=runtime()
        )
    )
    try:
        first = model.state()
        check_components(first["components"], recompute(window_edges(mentions, 0, DAY)), DAY)
        rows = []
        for i in range(1, steps + 1):
            end = DAY + i * MINUTE
            doc = model.move_to(end)
            edges = window_edges(mentions, end - DAY, end)
            recompute_s, want = timed_call(lambda edges=edges: recompute(edges))
            check_components(doc["components"], want, end)
            entered = np.searchsorted(times, [end - MINUTE, end])
            left = np.searchsorted(times, [end - DAY - MINUTE, end - DAY])
            rows.append(
                {
                    "end": end,
                    "window_edges": edges.height,
                    "entered": int(entered[1] - entered[0]),
                    "left": int(left[1] - left[0]),
                    "components": len(want),
                    "largest": want[0]["size"] if want else 0,
                    "step_ms": round(doc["step_ms"], 3),
                    "recompute_ms": round(recompute_s * 1e3, 3),
                }
            )
            gc.collect()  # (a collection left over from one step is not charged to the next)
    finally:
        model.close()
    step = summary([r["step_ms"] / 1e3 for r in rows])
    networkx = summary([r["recompute_ms"] / 1e3 for r in rows])
    return {
        "stream": {
            "scale": scale,
            **knobs,
            "mentions": mentions.height,
            "users": int(pl.concat([mentions["src"], mentions["dst"]]).n_unique()),
            "generate_s": round(generate_s, 3),
        },
        "window_s": DAY,
        "step_s": MINUTE,
        "first_result_s": round(first_result_s, 3),
        "first_window": {
            "edges": int(np.searchsorted(times, DAY)),
            "components": len(first["components"]),
            "largest": first["components"][0]["size"] if first["components"] else 0,
        },
        "window_edges_median": int(np.median([r["window_edges"] for r in rows])),
        "components_median": int(np.median([r["components"] for r in rows])),
        "ddflow_step": step,
        "networkx_recompute": networkx,
        "recompute_over_step": round(networkx["median_ms"] / step["median_ms"], 2),
        "steps": rows,
        "peak_rss_mb": peak_rss_mb(),
        "result_checked": True,
    }


def run(quick: bool = False) -> dict[str, Any]:
    result = measure(30, 5, scale=QUICK_SCALE) if quick else measure(48, 20)
    return {
        "benchmark": "demo",
        "machine": machine(),
        "reducer": "native" if native_reducer() else "python",
        "regions": loop_regions(),
        "quick": quick,
        **result,
    }
