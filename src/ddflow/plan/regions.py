"""Loop regions: the loops of a plan that a runtime can run whole, with its own scheduler.

A *region* is a loop of the top scope with everything inside it (nested loops included): the
nodes of the loop's scope and of the scopes within it, the ``enter`` nodes that bring outer
collections in and the ``leave`` nodes that take results out. A runtime that runs regions
(the native core: ``ddflow.runtime.native.region``) runs such a loop as one operator, whose
iterations never come back to Python. :func:`find_regions` finds them and describes each as
the nodes the core takes (:class:`RegionPlan`); a loop that holds anything else stays a graph
of Python operators, and :func:`find_regions` says why (``Dataflow.explain()`` shows it).

A region's nodes hold integers: every column of every node is ``int64`` or ``bool``
(nullable or not). Its operations are those the core has: ``select``, ``with_columns`` and
``filter`` of the expressions :func:`compile_expr` compiles (column references, integer and
boolean literals, ``+``, ``-``, ``*``, negation, the comparisons, ``&``, ``|``, ``~``,
``is_null``, ``is_not_null`` and casts between ``int64`` and ``bool``), ``negate``,
``concat``, ``arrange`` (a join arranges its inputs itself), inner ``join``, ``reduce`` of
``distinct`` and of ``count``, ``sum``, ``min``, ``max`` and ``arg_max`` aggregates that
are not all counts and sums, and the loop's ``enter``, ``variable``, ``feedback`` and
``leave`` of plain (not prioritized) loops.

>>> import ddflow as dd
>>> flow = dd.Dataflow()
>>> e = flow.input("edges", schema={"src": "int64", "dst": "int64"})
>>> _ = dd.graph.connected_components(e).output()
>>> (region,) = find_regions(flow.plan)[0]
>>> [n[0] for n in region.nodes][:4], region.sinks
(['source', 'source', 'enter', 'variable'], [11])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddflow.expr.nodes import Expr, output_dtype
from ddflow.plan.nodes import Node, Plan, Scope
from ddflow.schema import Schema

__all__ = ["RegionPlan", "compile_expr", "find_regions"]

#: the column types a region holds
_TYPES = ("int64", "bool")
_ARITHMETIC = ("+", "-", "*")
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
_LOGIC = ("&", "|")
_AGGREGATES = ("count", "sum", "min", "max", "arg_max")


class NotNative(Exception):
    """A loop a region cannot hold, and why."""


@dataclass
class RegionPlan:
    """A loop of the plan as the core runs it.

    ``nodes``: ``(kind, inputs, coordinates, arity, params)`` of every node, as
    ``ddflow._native.Region`` takes them; ``sources``: the outer nodes read, by input;
    ``sinks``: the index of each output's node; ``leaves``: the ``leave`` nodes, by output;
    ``booleans``: per output, which of its
    columns are booleans; ``variables``: the loop name of each ``variable`` node, by the
    index of its node; ``members``: the ids of the plan nodes it holds; ``name``: the loop's.
    """

    name: str
    nodes: list[tuple[str, list[int], list[str], int, Any]] = field(default_factory=list)
    sources: list[Node] = field(default_factory=list)
    sinks: list[int] = field(default_factory=list)
    leaves: list[Node] = field(default_factory=list)
    booleans: list[list[bool]] = field(default_factory=list)
    variables: dict[int, str] = field(default_factory=dict)
    members: set[int] = field(default_factory=set)

    @property
    def last(self) -> int:
        """The last of its plan nodes (every source is built before it)."""
        return max(self.members)


def _within(scope: Scope, loop: Scope) -> bool:
    return loop.contains(scope)


def find_regions(plan: Plan) -> tuple[list[RegionPlan], dict[str, str]]:
    """The loops of the top scope a region can hold, and, by loop name, why each of the
    others cannot be one."""
    regions: list[RegionPlan] = []
    refused: dict[str, str] = {}
    for scope in plan.scopes:
        if scope.parent is not plan.top or scope.variable is None:
            continue
        name = str(scope.variable.params.get("name"))
        try:
            regions.append(_region(plan, scope, name))
        except NotNative as e:
            refused[name] = str(e)
    return regions, refused


def _region(plan: Plan, loop: Scope, name: str) -> RegionPlan:
    members = [
        n
        for n in plan.nodes
        if _within(n.scope, loop)
        or (n.op == "leave" and n.inputs and _within(n.inputs[0].scope, loop))
    ]
    ids = {n.id for n in members}
    last = max(ids)
    for n in plan.nodes:
        if n.id not in ids and n.id < last and any(i.id in ids for i in n.inputs):
            raise NotNative(f"{n.op} (node {n.id}) reads the loop before it is closed")
    region = RegionPlan(name, members=ids)
    index: dict[int, int] = {}
    for n in members:
        for i in n.inputs:
            if i.id not in ids and i.id not in index:
                _check_schema(i.schema, f"the loop's input {i.op}")
                index[i.id] = len(region.nodes)
                region.nodes.append(("source", [], ["product"], len(i.schema), None))
                region.sources.append(i)
    # (nodes are created after their inputs, but a variable reads its feedback, made later:
    # every node's index is known before the inputs are looked up)
    for k, n in enumerate(members):
        index[n.id] = len(region.nodes) + k
    specs = [_node(n, index) for n in members]
    for n in members:
        if n.op == "variable":
            region.variables[index[n.id]] = str(n.params.get("name"))
    region.nodes.extend(specs)
    for n in members:
        if n.op == "leave" and n.scope is plan.top:
            region.sinks.append(len(region.nodes))
            region.leaves.append(n)
            region.nodes.append(("sink", [index[n.id]], ["product"], len(n.schema), None))
            region.booleans.append([dt.name == "bool" for dt in n.schema.values()])
    return region


def _check_schema(schema: Schema, what: str) -> None:
    for c, dt in schema.items():
        if dt.name not in _TYPES:
            raise NotNative(f"{what} has column {c!r} of type {dt}; a region holds integers")


def _node(n: Node, index: dict[int, int]) -> tuple[str, list[int], list[str], int, Any]:
    _check_schema(n.schema, f"{n.op} (node {n.id})")
    ins = [index[i.id] for i in n.inputs]
    coords: list[str] = list(n.scope.time_type.coordinates)
    arity = len(n.schema)
    op, p = n.op, n.params
    if op == "enter":
        if p.get("compiled") is not None or n.scope.coordinate != "product":
            raise NotNative("a prioritized loop")
        ins = [index[n.inputs[0].id]]
        return ("enter", ins, coords, arity, "product")
    if op == "variable":
        # (its second input, the feedback, is connected by the feedback node)
        feedback = n.scope.feedback
        assert feedback is not None
        return ("variable", [*ins, index[feedback.id]], coords, arity, None)
    if op == "feedback":
        return ("feedback", ins, coords, arity, p.get("max_iterations"))
    if op == "leave":
        return ("leave", ins, coords, arity, None)
    if op in ("concat", "negate"):
        return (op, ins, coords, arity, None)
    if op == "arrange":
        return ("concat", ins, coords, arity, None)
    src = n.inputs[0].schema if n.inputs else n.schema
    if op == "select":
        exprs = [compile_expr(e, src) for _, e in p["exprs"]]
        return ("map", ins, coords, arity, exprs)
    if op == "with_columns":
        given = dict(p["exprs"])
        exprs = [
            compile_expr(given[c], src) if c in given else ("col", src.names.index(c))
            for c in n.schema.names
        ]
        return ("map", ins, coords, arity, exprs)
    if op == "filter":
        return ("filter", ins, coords, arity, compile_expr(p["expr"], src))
    if op == "join":
        left, right = n.inputs[0].schema, n.inputs[1].schema
        output = [
            (0, left.names.index(c)) if side == "l" else (1, right.names.index(c))
            for side, c, _ in p["output"]
        ]
        lk = [left.names.index(c) for c in p["left_on"]]
        rk = [right.names.index(c) for c in p["right_on"]]
        return ("join", ins, coords, arity, (lk, rk, output))
    if op == "reduce":
        return ("reduce", ins, coords, arity, _reduce(n, src))
    raise NotNative(f"{op} (node {n.id}) does not run in a region")


def _reduce(n: Node, src: Schema) -> tuple[list[int], list[int], str, list[Any]]:
    p = n.params
    keys = [src.names.index(c) for c in p["keys"]]
    if p["kind"] == "distinct":
        return keys, [], "distinct", []
    if p["kind"] != "agg":
        raise NotNative(f"a reduce of kind {p['kind']!r}")
    aggs = p["aggs"]
    if any(kind not in _AGGREGATES for _, kind, _ in aggs):
        raise NotNative("an aggregate the core has not")
    if all(kind in ("count", "sum") for _, kind, _ in aggs):
        raise NotNative("an aggregate of counts and sums alone")
    ranked = {name: by for name, _, by in p.get("ranked", ())}
    read = sorted({c for _, _, c in aggs if c is not None} | set(ranked.values()))
    position = {c: i for i, c in enumerate(read)}
    out = []
    for name, kind, c in aggs:
        if kind == "sum" and src[c].name == "bool":
            raise NotNative("a sum of booleans")
        by = position[ranked[name]] if kind == "arg_max" else None
        out.append((kind, None if c is None else position[c], by))
    return keys, [src.names.index(c) for c in read], "agg", out


def compile_expr(e: Expr, schema: Schema) -> Any:
    """``e`` over columns of ``schema`` as the nested tuples the core evaluates (see the
    module); :class:`NotNative` for an expression it has not.

    >>> from ddflow.expr.nodes import col, lit
    >>> s = Schema({"a": "int64", "b": "int64"})
    >>> compile_expr((col("a") + 1 > col("b")) & col("a").is_not_null(), s)
    ('binary', '&', ('binary', '>', ('binary', '+', ('col', 0), ('lit', 1)), ('col', 1)), \
('is_not_null', ('col', 0)))
    """
    kind = e.kind
    if kind == "alias":
        return compile_expr(e.args[0], schema)
    if kind == "col":
        name = e.params[0]
        if name not in schema.names or schema[name].name not in _TYPES:
            raise NotNative(f"column {name!r}")
        return ("col", schema.names.index(name))
    if kind == "lit":
        value, dtype = e.params
        if dtype is not None and dtype.name not in _TYPES:
            raise NotNative(f"a literal of type {dtype}")
        if value is None or isinstance(value, bool):
            return ("lit", None if value is None else int(value))
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return ("lit", value)
        raise NotNative(f"the literal {value!r}")
    if kind == "cast":
        inner = e.args[0]
        source, target = _type(inner, schema), e.params[0].name
        if source not in _TYPES or target not in _TYPES:
            raise NotNative(f"a cast of {source} to {target}")
        compiled = compile_expr(inner, schema)
        return ("to_bool", compiled) if (source, target) == ("int64", "bool") else compiled
    if kind == "function" and e.params[0] in ("is_null", "is_not_null"):
        return (e.params[0], compile_expr(e.args[0], schema))
    if kind == "unary":
        (op,) = e.params
        t = _type(e.args[0], schema)
        if op == "-" and t == "int64":
            return ("neg", compile_expr(e.args[0], schema))
        if op == "~" and t == "bool":
            return ("not", compile_expr(e.args[0], schema))
        raise NotNative(f"the operator {op} of {t}")
    if kind == "binary":
        (op,) = e.params
        a, b = e.args
        ta, tb = _type(a, schema), _type(b, schema)
        ok = (
            (op in _ARITHMETIC and ta == tb == "int64")
            or (op in _COMPARISONS and ta == tb and ta in _TYPES)
            or (op in _LOGIC and ta == tb == "bool")
        )
        if not ok:
            raise NotNative(f"{ta} {op} {tb}")
        return ("binary", op, compile_expr(a, schema), compile_expr(b, schema))
    raise NotNative(f"the expression {e!r}")


def _type(e: Expr, schema: Schema) -> str:
    return output_dtype(e, schema).name
