"""Seeded graph generators shared by the benchmarks (the same data for every system)."""

from __future__ import annotations

import numpy as np
import polars as pl


def rmat(
    edges: int, seed: int = 1, a: float = 0.57, b: float = 0.19, c: float = 0.19
) -> pl.DataFrame:
    """An R-MAT (power-law) edge list with about ``edges / 8`` nodes, as ``src, dst`` int64.

    Each edge picks a quadrant of the adjacency matrix at every one of ``scale`` levels with
    probabilities ``a, b, c, 1 - a - b - c``; self-loops are kept (they do not change
    components)."""
    scale = max(int(np.ceil(np.log2(max(edges // 8, 2)))), 1)
    rng = np.random.default_rng(seed)
    src = np.zeros(edges, dtype=np.int64)
    dst = np.zeros(edges, dtype=np.int64)
    for level in range(scale):
        r = rng.random(edges)
        right = (r >= a) & (r < a + b) | (r >= a + b + c)
        down = r >= a + b
        src |= down.astype(np.int64) << level
        dst |= right.astype(np.int64) << level
    # permute node ids so that the hubs are not the smallest ids
    perm = rng.permutation(1 << scale).astype(np.int64)
    return pl.DataFrame({"src": perm[src], "dst": perm[dst]})


def random_changes(
    live: pl.DataFrame, n_nodes: int, changes: int, rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``changes`` edge changes: half deletions of live edges, half insertions of new ones."""
    deletions = changes // 2
    insertions = changes - deletions
    idx = (
        rng.choice(live.height, size=deletions, replace=False)
        if deletions
        else np.array([], dtype=np.int64)
    )
    gone = live[idx]
    new = pl.DataFrame(
        {
            "src": rng.integers(0, n_nodes, insertions, dtype=np.int64),
            "dst": rng.integers(0, n_nodes, insertions, dtype=np.int64),
        }
    )
    return gone, new
