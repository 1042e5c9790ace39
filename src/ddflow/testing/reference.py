"""The reference interpreter: a dataflow's plan evaluated from scratch.

The reference interpreter evaluates a dataflow's plan *from scratch* on the accumulated inputs of
one epoch: every collection is a plain ``Counter`` of records (tuples) to multiplicities, and
every operator is its textbook definition. It shares no code with the engine that could hide a
bug of both: column expressions and the typing of rows are evaluated in plain Python from the
documented rules (:mod:`ddflow.testing.values`), and loops follow the papers' definitions of
ingress, feedback and egress (:mod:`ddflow.testing.loops`); from the engine it reads only the
plan (nodes, schemas, the user's expressions and functions). Agreement between the two at every
epoch is evidence that the incremental computation is right::

    snapshot of output at epoch e  ==  reference(plan, inputs accumulated at epochs <= e)

>>> import ddflow as dd
>>> from collections import Counter
>>> flow = dd.Dataflow()
>>> xs = flow.input("xs", schema={"x": "int64"})
>>> out = xs.filter(dd.col("x") > 1).distinct().output()
>>> reference(flow, {"xs": Counter({(1,): 1, (2,): 2, (3,): 1})})[out]
Counter({(2,): 1, (3,): 1})
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd
import polars as pl

from ddflow.plan.nodes import Node, Scope
from ddflow.testing.loops import ReferenceError, fixed_point, ingress
from ddflow.testing.values import conform, evaluator

if TYPE_CHECKING:
    from ddflow.api.dataflow import Dataflow
    from ddflow.api.outputs import Output
    from ddflow.expr.nodes import Expr

__all__ = ["ReferenceError", "accumulate", "frame_to_counter", "reference"]


def reference(
    flow: Dataflow, inputs: Mapping[str, Mapping[tuple[Any, ...], int]]
) -> dict[Output, Counter]:
    """Evaluate every output of ``flow`` from scratch on the given input collections."""
    interp = _Interpreter(flow, inputs)
    return {o: interp.value(o.node.inputs[0], {}) for o in flow.outputs}


def accumulate(updates: Iterable[tuple[tuple[Any, ...], int]]) -> Counter:
    """Sum ``(record, diff)`` updates into a multiset without zero entries."""
    c: Counter = Counter()
    for r, d in updates:
        c[r] += d
    return _clean(c)


def frame_to_counter(frame: pd.DataFrame | pl.DataFrame, count: str = "count") -> Counter:
    """A snapshot DataFrame (columns plus ``count``) as a ``Counter`` of records."""
    if isinstance(frame, pd.DataFrame):
        frame = pl.from_pandas(frame)
    names = [c for c in frame.columns if c != count]
    out: Counter = Counter()
    for row in frame.select([*names, count]).iter_rows():
        out[tuple(tuple(v) if isinstance(v, list) else v for v in row[:-1])] += row[-1]
    return _clean(out)


def _clean(c: Counter) -> Counter:
    return Counter({k: v for k, v in c.items() if v != 0})


class _Interpreter:
    def __init__(self, flow: Dataflow, inputs: Mapping[str, Mapping[tuple[Any, ...], int]]) -> None:
        self.flow = flow
        self.inputs = inputs
        self.memo: dict[tuple[int, tuple[tuple[int, int], ...]], Counter] = {}
        self.tokens = itertools.count()

    def value(self, node: Node, env: dict[int, Counter]) -> Counter:
        key = (
            node.id,
            tuple(
                sorted(
                    (k, v[0])
                    for k, v in env.items()
                    if _scope_of_var(self.flow, k).contains(node.scope)
                )
            ),
        )
        got = self.memo.get(key)
        if got is None:
            got = _clean(getattr(self, f"_{node.op}")(node, env))
            self.memo[key] = got
        return got

    # ------------------------------------------------------------------ linear

    def _input(self, node: Node, env: dict[int, Counter]) -> Counter:
        out: Counter = Counter()
        for r, m in self.inputs.get(node.params["name"], {}).items():
            out[_canonical(r)] += m
        return out

    def _exprs(self, node: Node, env: dict[int, Counter], how: str) -> Counter:
        """``select``, ``with_columns`` and ``filter`` record by record, with the plain-Python
        expression rules of :mod:`ddflow.testing.values` (not the engine's compiled ones)."""
        schema = node.inputs[0].schema
        # the records as the engine stores them (an int given for a float column is a float)
        src = self._typed(node.inputs[0], self.value(node.inputs[0], env))
        if how == "filter":  # a null predicate drops the record, as False does
            keep = evaluator(node.params["expr"], schema)
            return Counter({r: m for r, m in src.items() if keep(r) is True})
        named: dict[str, Expr] = dict(
            item if isinstance(item, tuple) else (item.output_name(), item)
            for item in node.params["exprs"]
        )
        given = {name: evaluator(e, schema) for name, e in named.items()}
        where = {name: i for i, name in enumerate(schema.names)}
        columns = [
            given[name] if name in given else (lambda r, i=where[name]: r[i])
            for name in node.schema.names
        ]
        out: Counter = Counter()
        for r, m in src.items():
            out[_canonical(tuple(f(r) for f in columns))] += m
        return out

    def _select(self, node: Node, env: dict[int, Counter]) -> Counter:
        return self._exprs(node, env, "select")

    def _with_columns(self, node: Node, env: dict[int, Counter]) -> Counter:
        return self._exprs(node, env, "with_columns")

    def _filter(self, node: Node, env: dict[int, Counter]) -> Counter:
        return self._exprs(node, env, "filter")

    def _map(self, node: Node, env: dict[int, Counter]) -> Counter:
        fn = node.params["fn"]
        out: Counter = Counter()
        for r, m in self._typed(node.inputs[0], self.value(node.inputs[0], env)).items():
            out[conform(node.schema, fn(r))] += m
        return out

    def _flat_map(self, node: Node, env: dict[int, Counter]) -> Counter:
        fn = node.params["fn"]
        out: Counter = Counter()
        for r, m in self._typed(node.inputs[0], self.value(node.inputs[0], env)).items():
            for v in fn(r):
                out[conform(node.schema, v)] += m
        return out

    def _typed(self, node: Node, c: Counter) -> Counter:
        """Records as the schema stores them (e.g. an int returned for a float column), by the
        plain-Python rules of :func:`ddflow.testing.values.conform`."""
        out: Counter = Counter()
        for r, m in c.items():
            out[_canonical(conform(node.schema, r))] += m
        return _clean(out)

    def _concat(self, node: Node, env: dict[int, Counter]) -> Counter:
        out: Counter = Counter()
        for i in node.inputs:
            for r, m in self.value(i, env).items():
                out[r] += m
        return out

    def _negate(self, node: Node, env: dict[int, Counter]) -> Counter:
        return Counter({r: -m for r, m in self.value(node.inputs[0], env).items()})

    def _identity(self, node: Node, env: dict[int, Counter]) -> Counter:
        return Counter(self.value(node.inputs[0], env))

    _consolidate = _identity
    _inspect = _identity
    _arrange = _identity
    _output = _identity
    _probe = _identity
    _enter = _identity

    def _vertex(self, node: Node, env: dict[int, Counter]) -> Counter:
        raise ReferenceError("the reference interpreter cannot evaluate a user vertex")

    _port = _vertex

    def _stage(self, node: Node, env: dict[int, Counter]) -> Counter:
        raise ReferenceError("the reference interpreter cannot evaluate a CBP stage")

    _delay = _delay_close = _stage

    # ------------------------------------------------------------------ joins and reductions

    def _join(self, node: Node, env: dict[int, Counter]) -> Counter:
        left, right = (self.value(i, env) for i in node.inputs)
        ln, rn = list(node.inputs[0].schema.names), list(node.inputs[1].schema.names)
        li = [ln.index(c) for c in node.params["left_on"]]
        ri = [rn.index(c) for c in node.params["right_on"]]
        index: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
        for r, m in right.items():
            key = tuple(r[i] for i in ri)
            if None not in key:  # a null join key matches nothing (as in SQL)
                index[key].append((r, m))
        picks = [
            (side, (ln if side == "l" else rn).index(c)) for side, c, _ in node.params["output"]
        ]
        out: Counter = Counter()
        for lrec, lm in left.items():
            for rrec, rm in index.get(tuple(lrec[i] for i in li), ()):
                row = tuple(lrec[i] if side == "l" else rrec[i] for side, i in picks)
                out[row] += lm * rm
        return out

    def _reduce(self, node: Node, env: dict[int, Counter]) -> Counter:
        src_node = node.inputs[0]
        src = self.value(src_node, env)
        kind = node.params["kind"]
        if kind == "distinct":
            return Counter({r: 1 for r, m in src.items() if m > 0})
        if kind == "threshold":
            fn = node.params["fn"]
            return Counter({r: int(fn(m)) for r, m in src.items()})
        names = list(src_node.schema.names)
        keys = list(node.params["keys"])
        ki = [names.index(k) for k in keys]
        groups: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
        for r, m in src.items():
            groups[tuple(r[i] for i in ki)].append((r, m))
        out: Counter = Counter()
        if kind == "agg":
            for key, rows in groups.items():
                total = sum(m for _, m in rows)
                if total <= 0:
                    continue
                vals = []
                for name, agg, c in node.params["aggs"]:
                    ci = names.index(c) if c is not None else -1
                    if agg == "count":
                        vals.append(total)
                    elif agg == "sum":  # nulls skipped
                        vals.append(sum(r[ci] * m for r, m in rows if r[ci] is not None))
                    elif agg == "mean":  # the sum (nulls skipped) over the count of all rows
                        vals.append(sum(r[ci] * m for r, m in rows if r[ci] is not None) / total)
                    elif agg in ("top_k", "arg_max"):
                        top = self._top(node, rows, name, ci, names)
                        vals.append(tuple(top) if agg == "top_k" else (top[0] if top else None))
                    else:
                        # over the column's values whose multiplicity in the group is positive
                        per_value: Counter = Counter()
                        for r, m in rows:
                            per_value[r[ci]] += m
                        # (nulls skipped; all null: null)
                        present = [v for v, m in per_value.items() if m > 0 and v is not None]
                        present.sort(key=_total_order)
                        pick = (lambda vs: vs[0]) if agg == "min" else (lambda vs: vs[-1])
                        vals.append(pick(present) if present else None)
                out[(*key, *vals)] += 1
            return self._typed(node, out)
        fn = node.params["fn"]
        vi = [names.index(v) for v in node.params["values"]]
        for key, rows in groups.items():
            # sorted by value, nulls first
            group = sorted(
                ((tuple(r[i] for i in vi), m) for r, m in rows if m > 0),
                key=lambda vm: tuple((v is not None, v) for v in vm[0]),
            )
            if not group:
                continue
            for o in fn(key if len(keys) != 1 else key[0], group):
                o = tuple(o) if isinstance(o, (tuple, list)) else (o,)
                out[(*key, *o)] += 1
        return self._typed(node, out)

    @staticmethod
    def _top(
        node: Node, rows: list[tuple[Any, int]], name: str, ci: int, names: list[str]
    ) -> list[Any]:
        """``top_k``: every record of the group whose value and ``by`` are not null, as many
        times as the multiplicity of its ``(value, by)`` pair when that is positive, in order
        of ``by`` from the largest then of value from the smallest (NaN above every number,
        ``-0.0`` equal to ``0.0``); the first ``k`` values."""
        ((k, by),) = [(k, by) for n, k, by in node.params["ranked"] if n == name]
        bi = names.index(by)
        per_pair: Counter = Counter()
        for r, m in rows:
            if r[ci] is not None and r[bi] is not None:
                per_pair[(r[ci], r[bi])] += m
        copies = [pair for pair, m in per_pair.items() for _ in range(m)]  # (none when m <= 0)

        def rank(pair: tuple[Any, Any]) -> tuple[Any, ...]:
            value, b = pair
            # larger by first: compare by its negated order key where it is a number; other
            # types (str, dates) are ranked by their position among the group's by values
            return (-_position(b, [p[1] for p in copies]), _total_order(value))

        return [value for value, _ in sorted(copies, key=rank)[:k]]

    # ------------------------------------------------------------------ loops

    def _variable(self, node: Node, env: dict[int, Any]) -> Counter:
        """The loop variable at the loop time being evaluated: ``env[id] = (token, value)``,
        set by the loop's walk over its times (:mod:`ddflow.testing.loops`)."""
        return env[node.id][1]

    def _feedback(self, node: Node, env: dict[int, Counter]) -> Counter:  # pragma: no cover
        raise ReferenceError(
            "feedback nodes are evaluated through their loop's leave "
            "(ddflow.testing.loops.fixed_point)"
        )

    def _leave(self, node: Node, env: dict[int, Counter]) -> Counter:
        """The loop's egress at the enclosing scope's time that ``env`` describes: the sum of
        the result's differences over the loop's times (:mod:`ddflow.testing.loops`)."""

        result = node.inputs[0]
        scope = result.scope
        assert scope.variable is not None and scope.feedback is not None
        variable, feedback = scope.variable, scope.feedback
        entered = feedback.inputs[1]
        source = self.value(entered.inputs[0], env)

        def body(x: Counter) -> Counter:
            return self.value(result, {**env, variable.id: (next(self.tokens), x)})

        priorities = (
            None if entered.params.get("priority") is None else self._priorities(entered, source)
        )
        return fixed_point(body, ingress(source, priorities), feedback.params["max_iterations"])

    def _priorities(self, entered: Node, source: Counter) -> dict[tuple[Any, ...], int]:
        schema = entered.inputs[0].schema
        priority = evaluator(entered.params["priority"], schema)
        out: dict[tuple[Any, ...], int] = {}
        for r in source:
            p = priority(conform(schema, r))
            if p is None or p < 0:
                raise ReferenceError(f"priority of {r} is {p}: priorities must be non-negative")
            out[r] = p
        return out


#: the one NaN of the reference's records: records are dictionary keys, and two NaN objects
#: are different keys (NaN != NaN), where the engine's records hold one NaN value
_NAN = float("nan")


def _canonical(record: tuple[Any, ...]) -> tuple[Any, ...]:
    """``record`` with every NaN the one :data:`_NAN` (and otherwise unchanged)."""
    if any(isinstance(v, tuple) for v in record):
        record = tuple(_canonical(v) if isinstance(v, tuple) else v for v in record)
    if any(v != v for v in record if isinstance(v, float)):
        return tuple(_NAN if isinstance(v, float) and v != v else v for v in record)
    return record


def _position(v: Any, values: list[Any]) -> int:
    """How many distinct values of ``values`` are below ``v`` in the engine's order."""
    return len({_total_order(x) for x in values if _total_order(x) < _total_order(v)})


def _total_order(v: Any) -> tuple[bool, Any]:
    """The engine's order of a column's values: NaN above every number."""
    nan = isinstance(v, float) and v != v
    return (nan, 0.0 if nan else v)


def _scope_of_var(flow: Dataflow, var_id: int) -> Scope:
    return flow.plan.nodes[var_id].scope
