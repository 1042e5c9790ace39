"""The reduce's row-by-row path for small steps against its columnar path, side by side.

One flow maintains connected components on an R-MAT graph; update batches of 1, 10 and 100
edge changes are applied alternately with the row path enabled (the default: reduce steps of
at most ``SMALL_REDUCE_ROWS`` rows are evaluated in Python) and disabled (every step columnar,
in Polars), so both see the same graph, the same kind of changes and the same machine load.
Reports the medians per batch size and their ratio (columnar / row path).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ddflow as dd
import ddflow.kernels.local_reduce as local_reduce
from benchmarks.cc import change_edges
from benchmarks.common import machine, summary
from benchmarks.graphs import rmat


def run(quick: bool = False) -> dict[str, Any]:
    n_edges, runs = (20_000, 5) if quick else (100_000, 15)
    edges = rmat(n_edges, seed=1)
    n_nodes = int(max(edges["src"].max(), edges["dst"].max())) + 1  # type: ignore[arg-type]
    flow = dd.Dataflow()
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    dd.graph.connected_components(inp).output()
    inp.insert_frame(edges)
    flow.advance_to(1)
    flow.run()
    rng = np.random.default_rng(11)
    default = local_reduce.SMALL_REDUCE_ROWS
    live = edges
    modes = {"row_path": default, "columnar_only": -1}
    lat: dict[str, dict[int, list[float]]] = {m: {} for m in modes}
    try:
        for b in (1, 10, 100):
            for _ in range(runs):
                for mode, limit in modes.items():
                    local_reduce.SMALL_REDUCE_ROWS = limit
                    seconds, live = change_edges(flow, inp, live, n_nodes, b, rng)
                    lat[mode].setdefault(b, []).append(seconds)
    finally:
        local_reduce.SMALL_REDUCE_ROWS = default
    rows = {}
    for b in lat["row_path"]:
        r, c = summary(lat["row_path"][b]), summary(lat["columnar_only"][b])
        rows[str(b)] = {"row_path": r, "columnar_only": c,
                        "speedup": round(c["median_ms"] / r["median_ms"], 2)}
    return {"benchmark": "reduce_paths", "machine": machine(), "edges": n_edges,
            "small_reduce_rows": default, "updates": rows}
