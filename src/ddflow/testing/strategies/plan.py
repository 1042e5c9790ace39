"""A random dataflow as code (:class:`Plan`): input schemas and the source of a function
``build(flow)`` that creates the inputs on a dataflow and returns the collections to output.

Invariant: ``repr(plan)`` is a runnable script (imports and ``build``) that builds the same
dataflow, so that a failing example is reproduced by copy and paste.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import ddflow as dd
from ddflow.testing.strategies.row_functions import _HELPERS
from ddflow.testing.strategies.update_streams import Stream, streams, streams_and_run_points

__all__ = ["Plan"]


@dataclass(frozen=True)
class Plan:
    """A random dataflow: input schemas and the Python code of a function ``build(flow)`` that
    creates the inputs on ``flow`` and returns the collections to output.

    ``repr(plan)`` is a runnable script (imports and ``build``), so that a failing example is
    reproduced by copy and paste. ``extremes`` says whether :meth:`streams` draws integer
    extremes and far dates (plans meant for Spark do not: integer overflow raises there);
    ``signed`` names the inputs made with ``signed=True``, whose streams may take records below
    zero.

    >>> plan = Plan({"xs": {"x": "int64"}},
    ...             'def build(flow):\\n    xs = flow.input("xs", schema={"x": "int64"})\\n'
    ...             '    return [xs.distinct()]\\n')
    >>> inputs, outputs = plan.build(dd.Dataflow())
    >>> list(inputs), [o.columns for o in outputs]
    (['xs'], [['x']])
    """

    schemas: dict[str, dict[str, str]]
    source: str
    extremes: bool = True
    signed: frozenset[str] = frozenset()

    def build(self, flow: dd.Dataflow) -> tuple[dict[str, dd.InputCollection], list[dd.Collection]]:
        """Create the plan's inputs and collections on ``flow``; returns the inputs by name
        and the collections to output (call ``.output()`` on them)."""
        namespace: dict[str, Any] = {"dd": dd, "datetime": datetime, **_HELPERS}
        exec(compile(self.source, "<ddflow plan>", "exec"), namespace)
        outputs = list(namespace["build"](flow))
        return {name: flow.inputs[name] for name in self.schemas}, outputs

    def streams(self, max_epochs: int = 4, max_updates: int = 6) -> st.SearchStrategy[Stream]:
        """Streams of updates to the plan's inputs (:func:`streams`)."""
        return streams(self.schemas, max_epochs, max_updates, self.extremes, self.signed)

    def streams_and_run_points(
        self, max_epochs: int = 4, max_updates: int = 6
    ) -> st.SearchStrategy[tuple[Stream, set[int]]]:
        """Streams of updates to the plan's inputs and run points
        (:func:`streams_and_run_points`)."""
        return streams_and_run_points(
            self.schemas, max_epochs, max_updates, self.extremes, self.signed
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis (and IPython) print dataclasses field by field; a plan prints as its code
        printer.text(repr(self))

    def __repr__(self) -> str:
        used = sorted(n for n in _HELPERS if n + "(" in self.source)
        imports = ["import datetime", "", "import ddflow as dd"]
        if used:
            imports.append(f"from ddflow.testing.strategies import {', '.join(used)}")
        return "\n".join(imports) + "\n\n\n" + self.source
