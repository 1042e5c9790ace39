"""A plan sent to a worker process: the nodes and scopes as plain data, the user's functions
with cloudpickle (lambdas and closures included).

What only worker 0 runs stays behind: an output's sink, a Parquet sink's committer (its part
writer goes), a probe, a vertex without a key (the
user's object; one with a key goes, each worker runs a copy), an ``inspect``'s function and the
inputs' handles; the nodes are sent without them. A function that
cannot be pickled (a closure over a lock, an open file) is reported when the dataflow is
built, at the user's line that gave it (:func:`check_shippable`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import cloudpickle

from ddflow.errors import GraphError
from ddflow.plan.nodes import Node, Plan, Scope

__all__ = ["check_shippable", "land", "ship"]

#: the parameters each kind of node leaves behind (they live in the coordinator)
_STAYS = {
    "output": ("sink",),
    "sink": ("committer",),
    "probe": ("probe",),
    "vertex": ("vertex",),
    "inspect": ("fn",),
}


@dataclass(frozen=True)
class _Ref:
    """A node named by a parameter (a loop's variable), by its id."""

    id: int


def _params(node: Node) -> dict[str, Any]:
    stays = () if node.op == "vertex" and node.params.get("key") else _STAYS.get(node.op, ())
    return {
        k: _Ref(v.id) if isinstance(v, Node) else v
        for k, v in node.params.items()
        if k not in stays
    }


def check_shippable(plan: Plan) -> None:
    """Raise :class:`~ddflow.errors.GraphError`, at the user's line, for a node whose
    parameters (a function, mostly) cannot be sent to a worker process."""
    for node in plan.nodes:
        try:
            cloudpickle.dumps(_params(node))
        except Exception as e:
            what = "function" if "fn" in node.params else "parameters"
            raise GraphError(
                f"the {what} of {node.op} cannot be sent to a worker process "
                f"({type(e).__name__}: {e}); with Dataflow(workers=...) every function must "
                "be picklable (no open files, locks or sockets in its closure)",
                site=node.site,
            ) from None


def ship(plan: Plan) -> bytes:
    """The plan as bytes for :func:`land`."""
    scopes = [(s.id, None if s.parent is None else s.parent.id, s.coordinate) for s in plan.scopes]
    nodes = [
        (n.id, n.op, tuple(i.id for i in n.inputs), n.schema, n.scope.id, _params(n), n.site)
        for n in plan.nodes
    ]
    loops = [
        (
            s.id,
            None if s.variable is None else s.variable.id,
            None if s.feedback is None else s.feedback.id,
        )
        for s in plan.scopes
    ]
    data: bytes = cloudpickle.dumps((scopes, nodes, loops))
    return data


def _id(node: Node | None) -> int | None:
    return None if node is None else node.id


def land(data: bytes) -> Plan:
    """The plan :func:`ship` sent (frozen)."""
    scopes, nodes, loops = cloudpickle.loads(data)
    plan = Plan()
    by_id: dict[int, Scope] = {plan.top.id: plan.top}
    for sid, parent, coordinate in scopes:
        if parent is None:
            continue
        scope = Scope(plan, by_id[parent], coordinate, sid)
        by_id[sid] = scope
        plan.scopes.append(scope)
    built: list[Node] = []
    for nid, op, inputs, schema, sid, params, site in nodes:
        params = {k: built[v.id] if isinstance(v, _Ref) else v for k, v in params.items()}
        node = Node(
            nid,
            op,
            tuple(built[i] for i in inputs),
            schema,
            by_id[sid],
            MappingProxyType(params),
            site,
        )
        built.append(node)
    plan.nodes = built
    for sid, variable, feedback in loops:
        by_id[sid].variable = None if variable is None else built[variable]
        by_id[sid].feedback = None if feedback is None else built[feedback]
    plan.frozen = True
    return plan
