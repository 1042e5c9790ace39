"""The operators' part of a checkpoint: each worker writes its copies' states as Parquet files
under the checkpoint's directory and describes them (manifest entries, checksums), and loads
them back; the same code runs in the coordinator and in a worker process or Spark task (see
:mod:`ddflow.api.checkpoints` for the rest of a checkpoint).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

import polars as pl

from ddflow.differential.operators.cbp import StageOp
from ddflow.differential.operators.cbp_flows import FrameOp
from ddflow.differential.operators.io import InputOp
from ddflow.differential.operators.vertex import VertexOp
from ddflow.errors import CheckpointError, TimelyError
from ddflow.timely.operator import Operator, OperatorState

__all__ = ["Files", "load_operators", "save_operators"]


class Files:
    """The files written under a checkpoint's directory, with their SHA-256 and size."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, dict[str, Any]] = {}

    def frame(self, name: str, frame: pl.DataFrame) -> str:
        """Write ``frame`` as ``name`` (a path under the root); the name."""
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        frame.write_parquet(path)
        with open(path, "rb") as f:
            data = f.read()
            os.fsync(f.fileno())
        self.files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        return name


def save_operators(
    ops: Sequence[Operator], root: str, worker: int
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Write the states of one worker's operators under ``root/worker-W``: their manifest
    entries and the files written. Only an input's, a vertex's and a CBP stage's or framer's
    capabilities may be held (at epochs after the checkpoint's: a stage's work for the next
    epochs, saved with it): a checkpoint is taken with nothing left to do."""
    files = Files(root)
    entries = []
    for op in ops:
        try:
            state = op.save_state()
        except TimelyError as e:
            raise CheckpointError(f"{e}: run() first") from None
        if op.held() and not isinstance(op, (InputOp, VertexOp, StageOp, FrameOp)):
            raise CheckpointError(f"{op.name} holds capabilities at {op.held()}: run() first")
        if state is None:
            continue
        entry: dict[str, Any] = {"index": op.index, "name": op.name, "frames": {}}
        for name, frame in state.frames.items():
            path = f"worker-{worker}/op-{op.index}-{name}.parquet"
            entry["frames"][name] = files.frame(path, frame)
        entry["values"] = state.values
        entries.append(entry)
    return entries, files.files


def load_operators(ops: Sequence[Operator], root: str, entries: list[dict[str, Any]]) -> None:
    """Load the states :func:`save_operators` wrote into a worker's operators, just started."""
    for entry in entries:
        op = ops[entry["index"]]
        if op.name != entry["name"]:
            raise CheckpointError(
                f"operator {entry['index']} is {op.name} here and {entry['name']} in the checkpoint"
            )
        frames = {n: pl.read_parquet(os.path.join(root, p)) for n, p in entry["frames"].items()}
        op.load_state(OperatorState(frames, entry["values"]))
