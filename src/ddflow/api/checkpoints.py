"""Checkpoints: a dataflow's state at a complete epoch, written to a directory and restored
(naiad-timely-dataflow, fault tolerance).

A checkpoint is taken when the dataflow is idle and every epoch before its inputs' epoch ``X``
is complete, with nothing of epoch ``X`` run yet: its epoch is ``X - 1``. It holds

* every operator's state (:meth:`~ddflow.timely.operator.Operator.save_state`): the updates of
  each arrangement as they are held, compacted to the frontier (their histories are not
  replayed), a user vertex's own state and the notifications it waits for, a sink's commits;
* each input's epoch and, for a checked input, the multiplicities its check keeps;
* each output's contents at the epoch (its history before the checkpoint is not kept:
  ``snapshot(e)`` of an earlier epoch is refused after a restore);
* the positions of the sources that registered with the flow (files, micro-batches read);
* the plan's signature, one line per node, so that a checkpoint is restored only into the
  same dataflow and a difference is named.

Layout: ``DIR/epoch=000000042/manifest.json`` (JSON: the above, and the SHA-256 and size of every
other file) beside Parquet files, ``worker-W/op-I-NAME.parquet`` for the operators' frames.
Each worker writes and loads its own part (:mod:`ddflow.plan.state`), a worker process or a
Spark task too: the directory must be one every worker reaches. A checkpoint is restored on as
many workers as wrote it.
A checkpoint is written in ``DIR/_tmp-*`` and renamed into place once whole, so a reader sees it
whole or not at all; the ``keep`` newest are kept. Restoring takes the newest checkpoint whose
manifest reads and whose files match their checksums; a damaged one is skipped, with a warning
naming the problem, for the one before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import uuid
import warnings
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.errors import CheckpointError
from ddflow.plan.nodes import Node, Plan
from ddflow.plan.state import Files, load_operators, save_operators

if TYPE_CHECKING:
    from ddflow.api.dataflow import Dataflow

__all__ = ["checkpoints", "complete_epoch", "plan_signature", "restore", "write"]

#: the version of the layout (a checkpoint of another is refused)
FORMAT = 1
MANIFEST = "manifest.json"
#: the column of multiplicities and counts in the files of inputs and outputs
COUNT = "__count"


def plan_signature(plan: Plan) -> list[str]:
    """One line per node: what it is, what it reads, its scope, its schema and its parameters
    (functions by name: a function's code may change between builds, its place may not)."""
    return [
        f"{n.id}: {n.op}({', '.join(str(i.id) for i in n.inputs)}) scope {n.scope.id} "
        f"{dict(n.schema.items())} {_describe(dict(n.params))}"
        for n in plan.nodes
    ]


def _describe(value: Any) -> str:
    """A parameter as text that is the same in every process (no addresses, sets sorted)."""
    if isinstance(value, Node):
        return f"node {value.id}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_describe(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_describe(v) for v in value)) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return f"{type(value).__name__}{_describe(fields)}"
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"function {value.__qualname__}"
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


def complete_epoch(flow: Dataflow) -> int:
    """The epoch a checkpoint of ``flow`` would be of, or :class:`CheckpointError` saying why
    none can be taken now."""
    if flow.worker is None or not flow.worker.idle():
        raise CheckpointError("a checkpoint is taken after run(): the dataflow has work to do")
    inputs = list(flow.inputs.values())
    open_epochs = {h.epoch for h in inputs if not h.closed}
    if len(open_epochs) > 1:
        raise CheckpointError(
            f"a checkpoint is taken with every open input at one epoch; they are at "
            f"{sorted(open_epochs)} (use flow.advance_to)"
        )
    x = open_epochs.pop() if open_epochs else flow.last_epoch()
    for h in inputs:
        if h._entered >= x and not h.closed:
            raise CheckpointError(
                f"input {h.name!r} already ran updates of epoch {x}: a checkpoint is of the "
                f"epochs before it; advance_to({x + 1}) and run() first"
            )
    if x == 0:
        raise CheckpointError("no epoch is complete yet: advance_to(1) and run() first")
    for out in flow.outputs:
        if out.complete_through < x - 1:
            raise CheckpointError("the outputs are not complete: run() first")
    return x - 1


def _workers(flow: Dataflow) -> list[Any]:
    """The workers: the one worker, or each shard of a cluster (in this process, or the proxy
    of one in another process or a Spark task, which writes and loads its part itself)."""
    shards = getattr(flow.worker, "shards", None)
    return [flow.worker] if shards is None else list(shards)


def _save_worker(worker: Any, w: int, root: str) -> tuple[list[Any], dict[str, Any]]:
    if getattr(worker, "local", True):
        return save_operators(worker.operators, root, w)
    saved: tuple[list[Any], dict[str, Any]] = worker.save_state(root)
    return saved


def _load_worker(worker: Any, root: str, entries: list[Any]) -> None:
    if getattr(worker, "local", True):
        load_operators(worker.operators, root, entries)
    else:
        worker.load_state(root, entries)


def write(flow: Dataflow, directory: str, keep: int) -> int:
    """Write a checkpoint of ``flow`` in ``directory`` (see the module); its epoch."""
    epoch = complete_epoch(flow)
    workers = _workers(flow)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f"_tmp-{uuid.uuid4().hex}")
    os.makedirs(tmp)
    try:
        files = Files(tmp)
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "epoch": epoch,
            "flow_epoch": flow.epoch,
            "workers": len(workers),
            "plan": plan_signature(flow.plan),
        }
        manifest["inputs"] = {}
        for i, (name, h) in enumerate(flow.inputs.items()):
            entry: dict[str, Any] = {"epoch": h.epoch, "closed": h.closed, "counts": None}
            if h._multiplicities is not None:
                data, counts = h._multiplicities.records()
                frame = data.with_columns(pl.Series(COUNT, counts, dtype=pl.Int64))
                entry["counts"] = files.frame(f"inputs/{i}.parquet", frame)
            manifest["inputs"][name] = entry
        manifest["outputs"] = [
            files.frame(
                f"outputs/{i}.parquet",
                out.snapshot_polars(epoch).rename({out.count_column: COUNT}),
            )
            for i, out in enumerate(flow.outputs)
        ]
        manifest["operators"] = []
        for w, worker in enumerate(workers):
            entries, written = _save_worker(worker, w, tmp)
            manifest["operators"].append(entries)
            files.files.update(written)
        manifest["sources"] = {
            key: _save_values(files, f"sources/{i}", s.checkpoint_values())
            for i, (key, s) in enumerate(sorted(flow._sources.items()))
        }
        manifest["files"] = files.files
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump(manifest, f)
            f.flush()
            os.fsync(f.fileno())
        final = os.path.join(directory, f"epoch={epoch:09d}")
        if os.path.exists(final):  # (the same epoch again: the new one replaces it)
            old = os.path.join(directory, f"_old-{uuid.uuid4().hex}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(directory, keep)
    return epoch


def _save_values(files: Files, prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    """A source's position: its frames written, the rest kept for JSON."""
    frames = {
        n: files.frame(f"{prefix}-{n}.parquet", v)
        for n, v in values.items()
        if isinstance(v, pl.DataFrame)
    }
    rest = {n: v for n, v in values.items() if n not in frames}
    return {"frames": frames, "values": rest}


def _prune(directory: str, keep: int) -> None:
    for name in checkpoints(directory)[:-keep] if keep > 0 else []:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    for name in os.listdir(directory):  # (what a writer that died left behind)
        if name.startswith(("_tmp-", "_old-")):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def checkpoints(directory: str) -> list[str]:
    """The names of the checkpoints in ``directory``, oldest first."""
    if not os.path.isdir(directory):
        return []
    return sorted(n for n in os.listdir(directory) if n.startswith("epoch="))


def _read(directory: str, name: str) -> dict[str, Any]:
    """The manifest of a checkpoint, its files checked, or ValueError saying what is wrong."""
    root = os.path.join(directory, name)
    try:
        with open(os.path.join(root, MANIFEST)) as f:
            manifest: dict[str, Any] = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"its manifest cannot be read ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError("its manifest is not of this version of ddflow")
    for path, want in manifest["files"].items():
        try:
            with open(os.path.join(root, path), "rb") as f:
                data = f.read()
        except OSError:
            raise ValueError(f"{path} is missing") from None
        if len(data) != want["bytes"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
            raise ValueError(f"{path} does not match its checksum (truncated or damaged)")
    return manifest


def restore(flow: Dataflow, directory: str) -> int | None:
    """Restore ``flow`` to the newest whole checkpoint in ``directory``; its epoch (None if
    there is none). Damaged checkpoints are skipped with a warning for the one before; where
    every one is damaged, :class:`CheckpointError` lists what is wrong with each (a program
    must not start again from epoch 0 as if there had been none)."""
    damaged: list[str] = []
    for name in reversed(checkpoints(directory)):
        try:
            manifest = _read(directory, name)
        except ValueError as e:
            damaged.append(f"{os.path.join(directory, name)}: {e}")
            warnings.warn(
                f"checkpoint {os.path.join(directory, name)} is skipped: {e}",
                RuntimeWarning,
                stacklevel=3,
            )
            continue
        _check_plan(flow, manifest)
        _load(flow, os.path.join(directory, name), manifest)
        return int(manifest["epoch"])
    if damaged:
        raise CheckpointError(
            f"every checkpoint in {directory} is damaged, so none can be restored; start "
            "from epoch 0 only by removing them. " + "; ".join(damaged)
        )
    return None


def _check_plan(flow: Dataflow, manifest: dict[str, Any]) -> None:
    mine, theirs = plan_signature(flow.plan), manifest["plan"]
    for a, b in zip(theirs, mine, strict=False):
        if a != b:
            raise CheckpointError(
                f"the checkpoint is of another dataflow: its node {a} is here {b}"
            )
    if len(mine) != len(theirs):
        longer, more = (theirs, "the checkpoint's") if len(theirs) > len(mine) else (mine, "this")
        raise CheckpointError(
            f"the checkpoint is of another dataflow: {more} dataflow has more nodes, from "
            f"{longer[min(len(mine), len(theirs))]}"
        )
    if manifest["workers"] != flow.workers:
        raise CheckpointError(
            f"the checkpoint is of {manifest['workers']} workers and this dataflow has "
            f"{flow.workers}: a checkpoint is restored on as many workers as wrote it"
        )
    missing = sorted(set(manifest["inputs"]) ^ set(flow.inputs))
    if missing:
        raise CheckpointError(f"the checkpoint's inputs differ from this dataflow's: {missing}")


def _load(flow: Dataflow, root: str, manifest: dict[str, Any]) -> None:
    def frame(path: str) -> pl.DataFrame:
        return pl.read_parquet(os.path.join(root, path))

    epoch = int(manifest["epoch"])
    flow._reset()
    for name, entry in manifest["inputs"].items():
        counts = None if entry["counts"] is None else frame(entry["counts"])
        flow.inputs[name]._restore(entry["epoch"], entry["closed"], counts, COUNT)
    for out, path in zip(flow.outputs, manifest["outputs"], strict=True):
        out._restore(epoch, frame(path).rename({COUNT: out.count_column}))
    flow._epoch = int(manifest["flow_epoch"])
    flow._positions = {
        key: {**v["values"], **{n: frame(p) for n, p in v["frames"].items()}}
        for key, v in manifest["sources"].items()
    }
    for key, values in flow._positions.items():
        source = flow._sources.get(key)
        if source is not None:
            source.restore_values(values)
    flow._ensure_built()
    for worker, entries in zip(_workers(flow), manifest["operators"], strict=True):
        _load_worker(worker, root, entries)
