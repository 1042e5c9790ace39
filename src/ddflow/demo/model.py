"""The demo's dataflow: a window over a mention stream, its strongly connected components, and
each component's top tags, maintained incrementally as the window moves.

:func:`components_and_top_tags` is the dataflow, written with the public API only; the
README shows it. :class:`WindowModel` feeds it from a :class:`~ddflow.io.ReplayWindow`, reads
its outputs as they change (``subscribe``: only each step's changes are read, never the whole
result), times every step, and times NetworkX recomputing the same window from scratch
(:mod:`ddflow.demo.oracle`) for comparison.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import polars as pl

import ddflow as dd
from ddflow.errors import InputError, call_site

__all__ = ["MENTIONS", "WindowModel", "components_and_top_tags"]

#: the schema of a mention stream
MENTIONS = {"time": "int64", "src": "int64", "dst": "int64", "tag": "str?"}


def components_and_top_tags(mentions: dd.Collection) -> tuple[dd.Collection, dd.Collection]:
    """The strongly connected components of the mention graph, ``(node, component)``, and
    each component's top tags, ``(component, top_tags)``: the tags of the mentions whose
    source and destination are both in it, most used first, ties by tag, at most three."""
    scc = dd.graph.strongly_connected_components(mentions, "src", "dst")
    src_component = scc.select(src=dd.col("node"), component=dd.col("component"))
    dst_component = scc.select(dst=dd.col("node"), dst_component=dd.col("component"))
    inside = (
        mentions.filter(dd.col("tag").is_not_null())
        .join(src_component, on="src")
        .join(dst_component, on="dst")
        .filter(dd.col("component") == dd.col("dst_component"))
    )
    uses = inside.group_by("component", "tag").agg(uses=dd.count())
    top_tags = uses.group_by("component").agg(top_tags=dd.top_k("tag", 3, by="uses"))
    return scc, top_tags


class WindowModel:
    """The demo's state: a window of ``window`` seconds over ``mentions`` (columns ``time``,
    ``src``, ``dst``, ``tag``), moved by :meth:`move_to`, with the components of at least two
    nodes and their top tags after every move.

    The window holds the mentions with ``start <= time < end`` (``start = end - window``). It
    starts ending at ``end`` (default: one window after the first mention, or just after the
    last one if the data is shorter). ``step`` is the size of a step of the page's buttons.
    With ``recompute=False`` the NetworkX recomputation is not run (``recompute_ms`` is None);
    ``progress=True`` prints the progress of building the first window to stderr every few
    seconds; ``runtime`` is the dataflow's runtime (default: a ``dd.LocalRuntime()``). Not
    thread-safe: one caller at a time.

    >>> from ddflow.demo.data import mention_stream
    >>> model = WindowModel(mention_stream(seed=1, hours=2), window=1800, step=60)
    >>> doc = model.move_to(model.end + 60)
    >>> doc["end"] - doc["start"], doc["components"] == model.recomputed()
    (1800, True)
    >>> model.close()
    """

    def __init__(
        self,
        mentions: pl.DataFrame,
        *,
        window: int = 86_400,
        step: int = 60,
        end: int | None = None,
        recompute: bool = True,
        progress: bool = False,
        runtime: Any = None,
    ) -> None:
        site = call_site()
        for name, value in (("window", window), ("step", step)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(f"{name} must be a positive number of seconds, got {value!r}")
        if mentions.height == 0:
            raise InputError("the mention stream is empty: there is nothing to show", site=site)
        self.window = window
        self.step = step
        self.recompute = recompute
        self.flow = dd.Dataflow(runtime)
        self.mentions = self.flow.input("mentions", schema=MENTIONS)
        self.slider = dd.io.ReplayWindow(self.mentions, mentions, "time", size=window)
        assert self.slider.first is not None and self.slider.last is not None
        self.first: int = self.slider.first
        self.last: int = self.slider.last
        scc, top_tags = components_and_top_tags(self.mentions)
        self._members: dict[int, set[int]] = {}
        self._tags: dict[int, list[str]] = {}
        scc.output().subscribe(self._on_scc)
        top_tags.output().subscribe(self._on_tags)
        self._epoch = 0
        self._steps: list[dict[str, Any]] = []
        self._iterations: list[dict[str, Any]] = []
        self._doc: dict[str, Any] = {}
        self._progress = progress
        self.move_to(min(self.first + window, self.last + 1) if end is None else end)
        self._progress = False

    # ------------------------------------------------------------------ the window

    @property
    def start(self) -> int:
        assert self.slider.start is not None
        return self.slider.start

    @property
    def end(self) -> int:
        assert self.slider.end is not None
        return self.slider.end

    def move_to(self, end: int) -> dict[str, Any]:
        """Move the window to end at ``end`` (``first <= end <= last + 1``) and return
        :meth:`state`."""
        if isinstance(end, bool) or not isinstance(end, int):
            raise InputError(f"the window's end must be an integer, got {end!r}")
        if not self.first <= end <= self.last + 1:
            raise InputError(
                f"the window's end {end} is outside the data: it may be from {self.first} (the "
                f"first mention) to {self.last + 1} (just after the last one)"
            )
        began = time.perf_counter()
        self.slider.move_to(end)
        self._epoch += 1
        self.flow.advance_to(self._epoch)
        self.flow.run(progress=self._progress, every=5.0)
        step_ms = (time.perf_counter() - began) * 1e3
        recompute_ms = None
        if self.recompute:
            began = time.perf_counter()
            self.recomputed()
            recompute_ms = (time.perf_counter() - began) * 1e3
        self._iterations = self._last_iterations()
        self._steps.append({"end": end, "step_ms": step_ms, "recompute_ms": recompute_ms})
        self._doc = {
            "start": self.start,
            "end": self.end,
            "components": self.components(),
            "step_ms": step_ms,
            "recompute_ms": recompute_ms,
        }
        return self.state()

    def state(self) -> dict[str, Any]:
        """``{"start", "end", "components": [{"size", "nodes", "top_tags"}], "step_ms",
        "recompute_ms"}``: the window, its components of at least two nodes (largest first,
        ties by smallest node; ``nodes`` ascending), the time of the last step, and of NetworkX
        recomputing the same window (None when not measured)."""
        return dict(self._doc)

    def components(self) -> list[dict[str, Any]]:
        """The components of at least two nodes now, with their top tags."""
        found = [(sorted(nodes), c) for c, nodes in self._members.items() if len(nodes) >= 2]
        found.sort(key=lambda nc: (-len(nc[0]), nc[0][0]))
        return [
            {"size": len(nodes), "nodes": nodes, "top_tags": self._tags.get(c, [])}
            for nodes, c in found
        ]

    def recomputed(self) -> list[dict[str, Any]]:
        """The same components recomputed from scratch by NetworkX (the demo's judge)."""
        from ddflow.demo.oracle import recompute

        return recompute(self.slider.rows())

    def latencies(self) -> list[dict[str, Any]]:
        """Every step so far: ``{"end", "step_ms", "recompute_ms"}``."""
        return list(self._steps)

    def iterations(self) -> list[dict[str, Any]]:
        """The last step's records in difference per loop iteration: ``{"loop", "iteration",
        "differences"}`` (the papers' Figure 1), summed over the times of each iteration."""
        return list(self._iterations)

    def close(self) -> None:
        """Close the input (the model can no longer move)."""
        if not self.mentions.closed:
            self.mentions.close()

    # ------------------------------------------------------------------ outputs

    def _on_scc(self, changes: pd.DataFrame) -> None:
        # a node's component changes as a retraction and an insertion in the same epoch
        for node, component, diff in changes[["node", "component", "diff"]].itertuples(index=False):
            if diff > 0:
                self._members.setdefault(int(component), set()).add(int(node))
            else:
                members = self._members.get(int(component))
                if members is not None:
                    members.discard(int(node))
                    if not members:
                        del self._members[int(component)]

    def _on_tags(self, changes: pd.DataFrame) -> None:
        ordered = changes.sort_values("diff")  # retractions first, then the new lists
        for component, tags, diff in ordered[["component", "top_tags", "diff"]].itertuples(
            index=False
        ):
            if diff > 0:
                self._tags[int(component)] = list(tags)
            elif self._tags.get(int(component)) == list(tags):
                del self._tags[int(component)]

    def _last_iterations(self) -> list[dict[str, Any]]:
        stats = self.flow.loop_stats(epoch=self._epoch - 1)
        if stats.empty:
            return []
        summed = stats.groupby(["loop", "iteration"], as_index=False)["differences"].sum()
        return [
            {"loop": str(loop), "iteration": int(i), "differences": int(n)}
            for loop, i, n in summed.itertuples(index=False)
        ]
