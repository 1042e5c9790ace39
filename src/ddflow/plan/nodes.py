"""The plan: a dataflow as data.

A plan is a graph of frozen :class:`Node` s. Each node names its operation (``op``), its input
nodes, its output :class:`~ddflow.schema.Schema`, the :class:`Scope` it lives in and the
parameters of the operation, and remembers the user's line that created it. Nodes are created
only from nodes that already exist, so node ids are a topological order of the graph once the
loops' feedback edges are set aside; a loop closes its cycle by naming its ``variable`` node in
the ``feedback`` node that follows the body.

Scopes nest: the top scope has times ``(epoch,)``; every ``iterate`` opens a child scope whose
times add a ``product`` coordinate, every ``prioritized_iterate`` one whose times add a
``lexicographic`` ``(priority, iteration)`` pair. Invariants checked here, once, when a node is
created:

* every input of a node is in the node's scope (outer collections are entered explicitly by
  ``enter`` nodes, which :mod:`ddflow.api.collection` inserts for the user);
* all nodes of a plan belong to one dataflow;
* a node's parameters are immutable.

The runtimes instantiate operators from these nodes; the reference interpreter
(:mod:`ddflow.testing`) evaluates them from scratch.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ddflow.errors import CallSite, GraphError
from ddflow.schema import Schema
from ddflow.timely.lattice import EPOCHS, Coordinate, TimeType

__all__ = ["Node", "Plan", "Scope"]


@dataclass(eq=False)
class Scope:
    """A (possibly nested) loop scope; the top scope has no parent."""

    plan: Plan
    parent: Scope | None
    coordinate: Coordinate | None
    id: int
    time_type: TimeType = field(init=False)
    #: the loop's variable node and its feedback node, set when the loop body is closed
    variable: Node | None = None
    feedback: Node | None = None

    def __post_init__(self) -> None:
        if self.parent is None:
            self.time_type = EPOCHS
        else:
            assert self.coordinate is not None
            self.time_type = self.parent.time_type.extend(self.coordinate)

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1

    def ancestors(self) -> list[Scope]:
        """This scope and its parents, innermost first."""
        out: list[Scope] = []
        s: Scope | None = self
        while s is not None:
            out.append(s)
            s = s.parent
        return out

    def contains(self, other: Scope) -> bool:
        """Is ``other`` this scope or nested inside it?"""
        return self in other.ancestors()

    def __repr__(self) -> str:
        return f"Scope(id={self.id}, depth={self.depth}, {self.time_type.coordinates})"


@dataclass(frozen=True, eq=False)
class Node:
    """One operation of the plan."""

    id: int
    op: str
    inputs: tuple[Node, ...]
    schema: Schema
    scope: Scope
    params: Mapping[str, Any]
    site: CallSite | None

    def __repr__(self) -> str:
        ins = ", ".join(str(i.id) for i in self.inputs)
        return f"Node({self.id}, {self.op}, inputs=[{ins}], scope={self.scope.id})"


class Plan:
    """The growing graph of one dataflow: nodes and scopes, frozen once the dataflow runs."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._scope_ids = itertools.count()
        self.top = Scope(self, None, None, next(self._scope_ids))
        self.scopes: list[Scope] = [self.top]
        self.frozen = False

    def new_scope(self, parent: Scope, coordinate: Coordinate) -> Scope:
        self._check_open(None)
        scope = Scope(self, parent, coordinate, next(self._scope_ids))
        self.scopes.append(scope)
        return scope

    def add(
        self,
        op: str,
        inputs: tuple[Node, ...],
        schema: Schema,
        scope: Scope,
        params: Mapping[str, Any] | None = None,
        site: CallSite | None = None,
    ) -> Node:
        self._check_open(site)
        for i in inputs:
            if i.scope.plan is not self:
                raise GraphError("collections of two different dataflows were combined", site=site)
            expected = scope
            if op == "enter":
                expected = scope.parent  # type: ignore[assignment]
            elif op == "leave":
                expected = i.scope if i.scope.parent is scope else scope
            if i.scope is not expected:
                raise GraphError(
                    f"internal: input {i} of {op!r} is in scope {i.scope.id}, not {expected.id}",
                    site=site,
                )
        node = Node(
            len(self.nodes), op, inputs, schema, scope, MappingProxyType(dict(params or {})), site
        )
        self.nodes.append(node)
        return node

    def _check_open(self, site: CallSite | None) -> None:
        if self.frozen:
            raise GraphError(
                "the dataflow is already running: build every collection, output and probe "
                "before the first run()",
                site=site,
            )
