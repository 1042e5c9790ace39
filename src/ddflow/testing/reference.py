"""The reference interpreter: a dataflow's plan evaluated from scratch.

The reference interpreter evaluates a dataflow's plan *from scratch* on the accumulated inputs of
one epoch: every collection is a plain ``Counter`` of records (tuples) to multiplicities, every
operator is its textbook definition, and a loop is iterated naively until nothing changes. It
shares no code with the differential operators, so agreement between the two at every epoch is
evidence that the incremental computation is right::

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

from ddflow.plan import Node, Scope

if TYPE_CHECKING:
    from ddflow.dataflow import Dataflow, Output

__all__ = ["ReferenceError", "accumulate", "frame_to_counter", "reference"]

MAX_REFERENCE_ITERATIONS = 10_000


class ReferenceError(RuntimeError):
    """The reference interpreter cannot evaluate this plan (e.g. a user vertex)."""


def reference(flow: Dataflow,
              inputs: Mapping[str, Mapping[tuple[Any, ...], int]]) -> dict[Output, Counter]:
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
        out[tuple(row[:-1])] += row[-1]
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
        key = (node.id, tuple(sorted((k, v[0]) for k, v in env.items()
                                     if _scope_of_var(self.flow, k).contains(node.scope))))
        got = self.memo.get(key)
        if got is None:
            got = _clean(getattr(self, f"_{node.op}")(node, env))
            self.memo[key] = got
        return got

    # ------------------------------------------------------------------ linear

    def _input(self, node: Node, env: dict[int, Counter]) -> Counter:
        return Counter(self.inputs.get(node.params["name"], {}))

    def _frame(self, schema_node: Node, c: Counter) -> pl.DataFrame:
        rows = list(c.keys())
        schema = schema_node.schema.polars_schema()
        return (pl.DataFrame(rows, schema=schema, orient="row") if rows
                else pl.DataFrame(schema=schema))

    def _exprs(self, node: Node, env: dict[int, Counter], how: str) -> Counter:
        src = self.value(node.inputs[0], env)
        out: Counter = Counter()
        if not src:
            return out
        items = list(src.items())
        frame = self._frame(node.inputs[0], Counter(dict(items)))
        if how == "select":
            # a column keeps the frame's height when every expression is a literal
            res = frame.with_row_index("__row").select([*node.params["compiled"], "__row"])
            res = res.drop("__row")
        elif how == "with_columns":
            res = frame.with_columns(list(node.params["compiled"])).select(list(node.schema.names))
        else:
            mask = (frame.select(node.params["compiled"].alias("m")).to_series()
                    .fill_null(False).to_list())
            return Counter({r: m for (r, m), keep in zip(items, mask, strict=True) if keep})
        for (_, m), row in zip(items, res.iter_rows(), strict=True):
            out[row] += m
        return out

    def _select(self, node: Node, env: dict[int, Counter]) -> Counter:
        return self._exprs(node, env, "select")

    def _with_columns(self, node: Node, env: dict[int, Counter]) -> Counter:
        return self._exprs(node, env, "with_columns")

    def _filter(self, node: Node, env: dict[int, Counter]) -> Counter:
        return self._exprs(node, env, "filter")

    def _map(self, node: Node, env: dict[int, Counter]) -> Counter:
        fn = node.params["fn"]
        single = len(node.schema.names) == 1
        out: Counter = Counter()
        for r, m in self.value(node.inputs[0], env).items():
            v = fn(r)
            out[v if not single or isinstance(v, tuple) else (v,)] += m
        return self._typed(node, out)

    def _flat_map(self, node: Node, env: dict[int, Counter]) -> Counter:
        fn = node.params["fn"]
        single = len(node.schema.names) == 1
        out: Counter = Counter()
        for r, m in self.value(node.inputs[0], env).items():
            for v in fn(r):
                out[v if not single or isinstance(v, tuple) else (v,)] += m
        return self._typed(node, out)

    def _typed(self, node: Node, c: Counter) -> Counter:
        """Records as the schema stores them (e.g. an int returned for a float column)."""
        if not c:
            return c
        items = list(c.items())
        frame = node.schema.rows_to_frame([r for r, _ in items])
        out: Counter = Counter()
        for (_, m), row in zip(items, frame.iter_rows(), strict=True):
            out[row] += m
        return out

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
        picks = [(side, (ln if side == "l" else rn).index(c))
                 for side, c, _ in node.params["output"]]
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
                for _, agg, c in node.params["aggs"]:
                    ci = names.index(c) if c is not None else -1
                    if agg == "count":
                        vals.append(total)
                    elif agg == "sum":
                        vals.append(sum(r[ci] * m for r, m in rows))
                    elif agg == "mean":
                        vals.append(sum(r[ci] * m for r, m in rows) / total)
                    else:
                        # over the column's values whose multiplicity in the group is positive
                        per_value: Counter = Counter()
                        for r, m in rows:
                            per_value[r[ci]] += m
                        # (nulls skipped; all null: null)
                        present = [v for v, m in per_value.items() if m > 0 and v is not None]
                        pick = min if agg == "min" else max
                        vals.append(pick(present) if present else None)
                out[(*key, *vals)] += 1
            return self._typed(node, out)
        fn = node.params["fn"]
        vi = [names.index(v) for v in node.params["values"]]
        for key, rows in groups.items():
            # sorted by value, nulls first
            group = sorted(((tuple(r[i] for i in vi), m) for r, m in rows if m > 0),
                           key=lambda vm: tuple((v is not None, v) for v in vm[0]))
            if not group:
                continue
            for o in fn(key if len(keys) != 1 else key[0], group):
                o = tuple(o) if isinstance(o, (tuple, list)) else (o,)
                out[(*key, *o)] += 1
        return self._typed(node, out)

    # ------------------------------------------------------------------ loops

    def _variable(self, node: Node, env: dict[int, Any]) -> Counter:
        return env[node.id][1]

    def _feedback(self, node: Node, env: dict[int, Counter]) -> Counter:  # pragma: no cover
        raise ReferenceError("feedback nodes are evaluated through their loop")

    def _leave(self, node: Node, env: dict[int, Counter]) -> Counter:
        result = node.inputs[0]
        scope = result.scope
        assert scope.variable is not None and scope.feedback is not None
        variable, feedback = scope.variable, scope.feedback
        entered = feedback.inputs[1]
        limit = feedback.params["max_iterations"]
        source = self.value(entered.inputs[0], env)

        def body(x: Counter) -> Counter:
            return self.value(result, {**env, variable.id: (next(self.tokens), x)})

        if entered.params.get("priority") is None:
            return _iterate(body, source, limit)
        prio = self._priorities(entered, source)
        by_priority: dict[int, Counter] = defaultdict(Counter)
        for r, m in source.items():
            by_priority[prio[r]][r] += m
        # Priority p starts from its records plus the variable where priority p - 1 stopped.
        # With max_iterations a priority may stop short of its fixed point; the difference
        # between its last variable and last result (``gap``) is then never fed back, and every
        # later variable differs from the body's previous result by it, exactly as the
        # feedback's times (p, i) order lexicographically.
        x: Counter = Counter()
        r_out: Counter = Counter()
        gap: Counter = Counter()
        for p in sorted(set(by_priority) | {0}):
            x = _add(x, by_priority.get(p, Counter()))
            x, r_out = _iterate_state(body, x, limit, gap)
            gap = _add(x, Counter({k: -v for k, v in r_out.items()}))
        return r_out

    def _priorities(self, entered: Node, source: Counter) -> dict[tuple[Any, ...], int]:
        records = list(source.keys())
        if not records:
            return {}
        frame = self._frame(entered.inputs[0], Counter({r: 1 for r in records}))
        ps = frame.select(entered.params["compiled"].alias("p")).to_series().to_list()
        for r, p in zip(records, ps, strict=True):
            if p is None or p < 0:
                raise ReferenceError(f"priority of {r} is {p}: priorities must be non-negative")
        return dict(zip(records, ps, strict=True))


def _scope_of_var(flow: Dataflow, var_id: int) -> Scope:
    return flow.plan.nodes[var_id].scope


def _add(a: Counter, b: Counter) -> Counter:
    out = Counter(a)
    for r, m in b.items():
        out[r] += m
    return _clean(out)


def _iterate_state(body: Any, x: Counter, limit: int | None, gap: Counter | None = None
                   ) -> tuple[Counter, Counter]:
    """Iterate from the variable ``x``: the body's result ``r = body(x)``, then the variable
    ``r + gap`` at the next iteration, until it stops changing or (with ``limit``) the
    feedback stops after ``limit - 1`` rounds. Returns the last variable and result (equal at a
    fixed point). ``gap`` is what earlier priorities of a prioritized loop left undone (see
    ``_leave``); it is empty for a plain loop."""
    gap = gap or Counter()
    for i in range(MAX_REFERENCE_ITERATIONS):
        r = body(x)
        if limit is not None and i + 1 >= limit:
            return x, r
        nx = _add(r, gap)
        if nx == x:
            return x, r
        x = nx
    raise ReferenceError("the reference loop did not converge")


def _iterate(body: Any, source: Counter, limit: int | None) -> Counter:
    return _iterate_state(body, source, limit)[1]
