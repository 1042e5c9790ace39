"""Collections: the user API.

A :class:`Collection` is an immutable, typed handle on a plan node: a multiset of records that
changes over time. Its methods add nodes to the plan and return new collections; nothing runs
until the dataflow does. Invariants:

* every collection has a schema, known when it is created; every expression is compiled and
  checked against it then, so mistakes surface at the user's line, not while running;
* collections used together are brought into the innermost scope among them (loop ingress,
  Naiad's ``Extend``); a collection from a sibling loop is an error;
* ``iterate(body)`` returns the fixed point of ``body`` starting from the collection:
  ``x0 = self``, ``x(i+1) = body(x(i))``, result = the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ddflow.api.aggregates import Agg, agg_type
from ddflow.errors import CallSite, ExpressionError, GraphError, SchemaError, call_site
from ddflow.expr.nodes import (
    Expr,
    compile_polars,
    expr_columns,
    named_exprs,
    output_dtype,
    output_schema,
)
from ddflow.plan.nodes import Node, Scope
from ddflow.schema import Schema

if TYPE_CHECKING:
    from ddflow.api.dataflow import Dataflow
    from ddflow.api.outputs import Output, Probe
    from ddflow.api.relational import Ordered

__all__ = ["Arranged", "Collection", "GroupBy"]


# ---------------------------------------------------------------------- collections


class Collection:
    """A changing multiset of typed records.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> xs = flow.input("xs", schema={"x": "int64"})
    >>> out = xs.filter(dd.col("x") > 1).with_columns(y=dd.col("x") * 10).output()
    >>> xs.insert([1, 2, 3]); flow.advance_to(1); flow.run()
    >>> out.snapshot().sort_values("x").to_dict("list")
    {'x': [2, 3], 'y': [20, 30], 'count': [1, 1]}
    """

    def __init__(self, flow: Dataflow, node: Node) -> None:
        self._flow = flow
        self._node = node

    # ------------------------------------------------------------------ basics

    @property
    def schema(self) -> Schema:
        """The collection's columns and their types."""
        return self._node.schema

    @property
    def columns(self) -> list[str]:
        return list(self._node.schema.names)

    @property
    def scope(self) -> Scope:
        return self._node.scope

    @property
    def flow(self) -> Dataflow:
        return self._flow

    def __repr__(self) -> str:
        return f"Collection({self._node.op}, {dict(self.schema)!r})"

    def _add(
        self,
        op: str,
        inputs: Sequence[Collection],
        schema: Schema,
        site: CallSite | None,
        **params: Any,
    ) -> Collection:
        nodes = _align([self, *inputs], site) if inputs else [self._node]
        node = self._flow.plan.add(op, tuple(nodes), schema, nodes[0].scope, params, site)
        return Collection(self._flow, node)

    # ------------------------------------------------------------------ linear

    def select(self, *exprs: Expr | str, **named: Expr) -> Collection:
        """Keep and compute columns: ``select("a", dd.col("b") + 1, c=dd.col("a") * 2)``."""
        site = call_site()
        items = _named_exprs(exprs, named, site)
        schema = _output_schema(items, self.schema, site)
        compiled = [compile_polars(e, self.schema).alias(n) for n, e in items]
        return self._add("select", [], schema, site, exprs=tuple(items), compiled=tuple(compiled))

    def with_columns(self, *exprs: Expr, **named: Expr) -> Collection:
        """Add or replace columns, keeping the others."""
        site = call_site()
        items = _named_exprs(exprs, named, site)
        new = _output_schema(items, self.schema, site)
        schema = self.schema.with_columns(dict(new))
        compiled = [compile_polars(e, self.schema).alias(n) for n, e in items]
        return self._add(
            "with_columns", [], schema, site, exprs=tuple(items), compiled=tuple(compiled)
        )

    def filter(self, predicate: Expr) -> Collection:
        """Keep the records for which ``predicate`` is true."""
        site = call_site()
        if not isinstance(predicate, Expr):
            raise ExpressionError(
                "filter takes a column expression such as dd.col('x') > 0", site=site
            )
        if output_dtype(predicate, self.schema).kind != "bool":
            raise ExpressionError(f"filter predicate {predicate!r} is not boolean", site=site)
        compiled = compile_polars(predicate, self.schema)
        return self._add("filter", [], self.schema, site, expr=predicate, compiled=compiled)

    def map(
        self, fn: Callable[[tuple[Any, ...]], Any], schema: Mapping[str, Any] | None = None
    ) -> Collection:
        """Apply a Python function to every record (a tuple); it returns the new record
        (a tuple, or a scalar for a one-column schema). The slow path: prefer expressions."""
        site = call_site()
        out = Schema(schema) if schema is not None else self.schema
        return self._add("map", [], out, site, fn=fn)

    def flat_map(
        self,
        fn: Callable[[tuple[Any, ...]], Iterable[Any]],
        schema: Mapping[str, Any] | None = None,
    ) -> Collection:
        """Apply a Python function returning any number of records to every record."""
        site = call_site()
        out = Schema(schema) if schema is not None else self.schema
        return self._add("flat_map", [], out, site, fn=fn)

    def concat(self, *others: Collection) -> Collection:
        """The multiset sum of this collection and others of the same schema."""
        site = call_site()
        for o in others:
            if _base_types(o.schema) != _base_types(self.schema):
                raise SchemaError(
                    f"concat of different schemas: {self.schema} and {o.schema}", site=site
                )
        # a column is nullable where any of the collections' is
        schema = Schema(
            {
                n: dt.with_nullable(any(c.schema[n].nullable for c in (self, *others)))
                for n, dt in self.schema.items()
            }
        )
        return self._add("concat", list(others), schema, site)

    def negate(self) -> Collection:
        """Every multiplicity negated."""
        return self._add("negate", [], self.schema, call_site())

    def consolidate(self) -> Collection:
        """The same collection, with updates to equal records at equal times added up."""
        return self._add("consolidate", [], self.schema, call_site())

    def inspect(self, fn: Callable[[Any], None]) -> Collection:
        """Call ``fn`` with every batch of updates passing by (a Polars DataFrame of the columns
        plus ``time`` and ``diff``); the collection is unchanged."""
        return self._add("inspect", [], self.schema, call_site(), fn=fn)

    # ------------------------------------------------------------------ joins

    def join(
        self,
        other: Collection,
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
        suffix: str = "_right",
        how: str = "inner",
    ) -> Collection:
        """Join on equal keys; the multiplicity of a pair is the product of theirs. A null key
        matches nothing, as in SQL.

        Output columns: this collection's columns, then ``other``'s except its key columns
        (clashing names get ``suffix``). ``how``: ``"inner"`` (the default); ``"left"`` also
        keeps each record of this collection without a match, ``other``'s columns null;
        ``"outer"`` also keeps each record of ``other`` without a match, this collection's
        columns null but the keys, which take ``other``'s (see :mod:`ddflow.api.relational`).

        >>> import ddflow as dd
        >>> flow = dd.Dataflow()
        >>> users = flow.input("users", schema={"id": "int64", "name": "str"})
        >>> visits = flow.input("visits", schema={"id": "int64", "page": "str"})
        >>> out = users.join(visits, on="id", how="outer").output()
        >>> users.insert([(1, "ann"), (2, "bob")]); visits.insert([(1, "/a"), (3, "/c")])
        >>> flow.advance_to(1); flow.run()
        >>> out.snapshot().sort_values("id").values.tolist()
        [[1, 'ann', '/a', 1], [2, 'bob', None, 1], [3, None, '/c', 1]]
        """
        site = call_site()
        if how not in ("inner", "left", "outer"):
            raise GraphError(f"join(how={how!r}): how is 'inner', 'left' or 'outer'", site=site)
        lk, rk = _join_keys(self, other, on, left_on, right_on, site)
        output: list[tuple[str, str, str]] = [("l", c, c) for c in self.schema.names]
        types = dict(self.schema)
        for c in other.schema.names:
            if c in rk:
                continue
            name = c if c not in types else c + suffix
            if name in types:
                raise SchemaError(f"join output would have column {name!r} twice", site=site)
            output.append(("r", c, name))
            types[name] = other.schema[c]
        left, right = self._arranged(lk, site), other._arranged(rk, site)
        inner = left._add(
            "join",
            [right],
            Schema(types),
            site,
            left_on=tuple(lk),
            right_on=tuple(rk),
            output=tuple(output),
        )
        if how == "inner":
            return inner
        differ = [
            (a, b)
            for a, b in zip(lk, rk, strict=True)
            if self.schema[a].polars != other.schema[b].polars
        ]
        if how == "outer" and differ:
            a, b = differ[0]
            raise SchemaError(
                f"join(how='outer'): the key columns {a!r} ({self.schema[a]}) and {b!r} "
                f"({other.schema[b]}) are of different types, and an outer join's key column "
                "holds either side's: cast one side first",
                site=site,
            )
        from ddflow.api.relational import outer_join

        return outer_join(self, other, inner, lk, rk, output, how)

    def semijoin(
        self,
        other: Collection,
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
    ) -> Collection:
        """The records whose key is present (positive multiplicity) in ``other``."""
        site = call_site()
        lk, rk = _join_keys(self, other, on, left_on, right_on, site)
        keys = other.select(*rk).distinct()
        out = self.join(keys, left_on=lk, right_on=rk)
        return out.select(*self.schema.names)

    def antijoin(
        self,
        other: Collection,
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
    ) -> Collection:
        """The records whose key is absent from ``other``."""
        return self.concat(self.semijoin(other, on, left_on=left_on, right_on=right_on).negate())

    def order_by(self, *by: str, descending: bool | Sequence[bool] = False) -> Ordered:
        """This collection in the order of the columns ``by`` (each ascending, or descending
        where ``descending`` says so: one flag, or one per column), for
        ``.limit(n)``: the ``n`` first records, kept exact as the collection changes (see
        :mod:`ddflow.api.relational`)."""
        from ddflow.api.relational import Ordered

        site = call_site()
        if not by:
            raise GraphError("order_by() needs at least one column", site=site)
        _check_keys(self.schema, list(by), site, "order_by")
        flags = [descending] * len(by) if isinstance(descending, bool) else list(descending)
        if len(flags) != len(by) or not all(isinstance(f, bool) for f in flags):
            raise GraphError(
                f"order_by: descending is one bool or one per column ({len(by)}), got "
                f"{descending!r}",
                site=site,
            )
        return Ordered(self, list(by), flags, site)

    # ------------------------------------------------------------------ multisets

    def union(self, other: Collection) -> Collection:
        """Each record with the larger of its multiplicities here and in ``other`` (Naiad's
        Union; the schemas must agree). See :mod:`ddflow.api.multisets`.

        >>> import ddflow as dd
        >>> flow = dd.Dataflow()
        >>> a, b = (flow.input(n, schema={"x": "int64"}) for n in "ab")
        >>> out = a.union(b).output()
        >>> a.insert([1, 1]); b.insert([1, 2]); flow.advance_to(1); flow.run()
        >>> out.snapshot().to_dict("list")
        {'x': [1, 2], 'count': [2, 1]}
        """
        from ddflow.api.multisets import union

        return union(self, other, call_site())

    def intersect(self, other: Collection) -> Collection:
        """Each record with the smaller of its multiplicities here and in ``other`` (Naiad's
        Intersect; the schemas must agree).

        >>> import ddflow as dd
        >>> flow = dd.Dataflow()
        >>> a, b = (flow.input(n, schema={"x": "int64"}) for n in "ab")
        >>> out = a.intersect(b).output()
        >>> a.insert([1, 1, 3]); b.insert([1, 2]); flow.advance_to(1); flow.run()
        >>> out.snapshot().to_dict("list")
        {'x': [1], 'count': [1]}
        """
        from ddflow.api.multisets import intersect

        return intersect(self, other, call_site())

    def cogroup(
        self,
        other: Collection,
        fn: Callable[..., Iterable[Any]],
        schema: Mapping[str, Any],
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
    ) -> Collection:
        """``fn(key, left, right)`` for every key with records on either side (Naiad's
        CoGroupBy): ``left``/``right`` are lists of ``(values, count)`` of the key's records of
        positive multiplicity here and in ``other`` (values: the non-key columns), and ``fn``
        returns the output rows (tuples of the ``schema`` columns, which follow the key columns
        in the output).

        >>> import ddflow as dd
        >>> flow = dd.Dataflow()
        >>> users = flow.input("users", schema={"id": "int64", "name": "str"})
        >>> visits = flow.input("visits", schema={"id": "int64", "page": "str"})
        >>> def seen(key, left, right):
        ...     return [(name, len(right)) for (name,), _ in left]
        >>> out = users.cogroup(visits, seen, {"name": "str", "visits": "int64"}, on="id")
        >>> out = out.output()
        >>> users.insert([(1, "ann"), (2, "bob")]); visits.insert([(1, "a"), (1, "b")])
        >>> flow.advance_to(1); flow.run()
        >>> out.snapshot().to_dict("list")
        {'id': [1, 2], 'name': ['ann', 'bob'], 'visits': [2, 0], 'count': [1, 1]}
        """
        from ddflow.api.multisets import cogroup

        site = call_site()
        lk, rk = _join_keys(self, other, on, left_on, right_on, site)
        return cogroup(self, other, fn, schema, lk, rk, site)

    def arrange(self, on: str | Sequence[str]) -> Arranged:
        """An arrangement of this collection indexed by ``on``, to share among several joins."""
        site = call_site()
        keys = _as_list(on)
        _check_keys(self.schema, keys, site, "arrange")
        node = self._flow.plan.add(
            "arrange", (self._node,), self.schema, self.scope, {"keys": tuple(keys)}, site
        )
        return Arranged(self._flow, node, tuple(keys))

    def _arranged(self, keys: Sequence[str], site: CallSite | None) -> Collection:
        return self

    # ------------------------------------------------------------------ reductions

    def group_by(self, *keys: str | Sequence[str]) -> GroupBy:
        """Group by key columns, then ``.agg(...)`` or ``.reduce(fn)``."""
        flat: list[str] = []
        for k in keys:
            flat.extend(_as_list(k))
        _check_keys(self.schema, flat, call_site(), "group_by")
        return GroupBy(self, flat)

    def distinct(self) -> Collection:
        """Each record with positive multiplicity, once."""
        return self._by_record("distinct", None, call_site())

    def threshold(self, fn: Callable[[int], int]) -> Collection:
        """Each record with multiplicity ``fn(m)`` where ``m`` is its multiplicity here."""
        return self._by_record("threshold", fn, call_site())

    def _by_record(self, kind: str, fn: Any, site: CallSite | None) -> Collection:
        """A reduce whose key is the whole record (``distinct``, ``threshold``)."""
        _check_keys(self.schema, self.schema.names, site, kind)
        names = tuple(self.schema.names)
        return self._add("reduce", [], self.schema, site, kind=kind, keys=names, fn=fn)

    # ------------------------------------------------------------------ loops

    def iterate(
        self,
        body: Callable[[Collection], Collection],
        *,
        max_iterations: int | None = None,
        name: str | None = None,
    ) -> Collection:
        """The fixed point of ``body`` starting from this collection.

        ``body`` receives the loop variable (this collection at iteration 0, the body's result
        at iteration ``i`` for ``i + 1``) and returns a collection of the same schema.
        Collections from outside the loop may be used in ``body``; they enter it unchanged.
        ``max_iterations`` bounds a loop that may not converge: the result is ``body`` applied
        that many times (or the fixed point, if reached first). ``name`` labels the loop in
        ``Dataflow.loop_stats()``."""
        return self._loop(body, "product", None, max_iterations, call_site(), name)

    def prioritized_iterate(
        self,
        body: Callable[[Collection], Collection],
        priority: Expr,
        *,
        max_iterations: int | None = None,
        name: str | None = None,
    ) -> Collection:
        """Like :meth:`iterate`, with records entering the loop in order of ``priority``
        (a non-negative integer expression): the loop reaches its fixed point with the records
        of each priority before those of the next are introduced (naiad-tech-report §5.1.2).
        With ``max_iterations``, each priority runs at most that many rounds; what a priority
        leaves undone is not resumed at later priorities."""
        site = call_site()
        if not isinstance(priority, Expr) or output_dtype(priority, self.schema).kind != "int":
            raise ExpressionError(f"priority {priority!r} must be an integer expression", site=site)
        compiled = compile_polars(priority, self.schema)
        return self._loop(body, "lexicographic", (priority, compiled), max_iterations, site, name)

    def _loop(
        self,
        body: Callable[[Collection], Collection],
        coordinate: str,
        priority: tuple[Expr, Any] | None,
        max_iterations: int | None,
        site: CallSite | None,
        name: str | None = None,
    ) -> Collection:
        if max_iterations is not None and max_iterations < 1:
            raise GraphError("max_iterations must be at least 1", site=site)
        plan = self._flow.plan
        scope = plan.new_scope(self.scope, coordinate)  # type: ignore[arg-type]
        params: dict[str, Any] = {}
        if priority is not None:
            params = {"priority": priority[0], "compiled": priority[1]}
        entered = plan.add("enter", (self._node,), self.schema, scope, params, site)
        label = name if name is not None else f"loop{scope.id}"
        taken = {n.params.get("name") for n in plan.nodes if n.op == "variable"}
        if label in taken:  # (a name given twice, e.g. by a library function called twice)
            label = f"{label} ({scope.id})"
        variable = plan.add("variable", (entered,), self.schema, scope, {"name": label}, site)
        result = body(Collection(self._flow, variable))
        if not isinstance(result, Collection):
            raise GraphError("the body of a loop must return a collection", site=site)
        (result_node,) = _align_to([result], scope, site)
        if _base_types(result_node.schema) != _base_types(self.schema):
            raise SchemaError(
                f"the loop body returned schema {result_node.schema}, expected {self.schema}",
                site=site,
            )
        widened = [
            n for n, dt in result_node.schema.items() if dt.nullable and not self.schema[n].nullable
        ]
        if widened:
            # the variable is the body's result at the next iteration: a null there would
            # be a null in a column its readers were built to take as never null
            raise SchemaError(
                f"the loop body may return nulls in {', '.join(map(repr, widened))}, which "
                f"the loop's input {self.schema} never holds: fill them in the body "
                "(.fill_null(...)) or make the input's columns nullable (.cast('...?'))",
                site=site,
            )
        feedback = plan.add(
            "feedback",
            (result_node, entered),
            self.schema,
            scope,
            {"variable": variable, "max_iterations": max_iterations},
            site,
        )
        scope.variable, scope.feedback = variable, feedback
        left = plan.add("leave", (result_node,), self.schema, self.scope, {}, site)
        return Collection(self._flow, left)

    # ------------------------------------------------------------------ sinks

    def output(self, *, count: str = "count") -> Output:
        """Collect this collection's changes: ``snapshot()``, ``changes()``, ``subscribe()``.
        ``count`` names a snapshot's multiplicity column; a collection with a column of that
        name needs another (``output(count="multiplicity")``)."""
        from ddflow.api.outputs import Output

        site = call_site()
        if self.scope.parent is not None:
            raise GraphError(
                "output() of a collection inside a loop body; output the loop's result", site=site
            )
        if not isinstance(count, str) or not count or count.startswith("__"):
            raise SchemaError(
                f"output(count=...) names the multiplicity column, got {count!r}", site=site
            )
        if count in self.schema.names:
            raise SchemaError(
                f"output(): a snapshot's multiplicity column is named {count!r}, and this "
                f"collection has a column of that name (its columns: {list(self.schema.names)}): "
                f'name the multiplicity otherwise, e.g. output(count="multiplicity")',
                site=site,
            )
        return Output(self, site, count)

    def probe(self) -> Probe:
        """Watch this collection's progress: which epochs are complete here."""
        from ddflow.api.outputs import Probe

        site = call_site()
        if self.scope.parent is not None:
            raise GraphError("probe() of a collection inside a loop body", site=site)
        return Probe(self, site)


class Arranged(Collection):
    """A collection arranged by key: joins on the same key share its index."""

    def __init__(self, flow: Dataflow, node: Node, keys: tuple[str, ...]) -> None:
        super().__init__(flow, node)
        self.keys = keys

    def _arranged(self, keys: Sequence[str], site: CallSite | None) -> Collection:
        return self if tuple(keys) == self.keys else Collection(self._flow, self._node)


class GroupBy:
    """A grouping of a collection by key columns."""

    def __init__(self, collection: Collection, keys: list[str]) -> None:
        self.collection = collection
        self.keys = keys

    def agg(self, **aggs: Agg) -> Collection:
        """One row per group with positive count: the keys and the named aggregates.

        ``count`` is the sum of multiplicities, ``sum`` weights values by them, ``min``/``max``
        range over the values whose multiplicity in the group is positive, ``mean`` is
        ``sum / count``; ``top_k``/``arg_max`` order the records of positive multiplicity
        (:func:`top_k`)."""
        site = call_site()
        c = self.collection
        if not aggs:
            raise GraphError("agg() needs at least one aggregate, e.g. n=dd.count()", site=site)
        types: dict[str, Any] = {k: c.schema[k] for k in self.keys}
        specs: list[tuple[str, str, str | None]] = []
        ranked: list[tuple[str, int, str]] = []
        for name, a in aggs.items():
            if not isinstance(a, Agg):
                raise GraphError(
                    f"aggregate {name}={a!r} is not dd.count/sum/min/max/mean/top_k/arg_max",
                    site=site,
                )
            if name in types:
                raise SchemaError(f"aggregate name {name!r} clashes with a key column", site=site)
            if a.column is not None:
                _check_columns(c.schema, [a.column], site, a.kind)
                dt = c.schema[a.column]
                if a.kind in ("sum", "mean") and not dt.is_numeric:
                    raise SchemaError(f"{a.kind}({a.column!r}) of non-numeric type {dt}", site=site)
                if a.kind != "count" and dt.kind == "list":
                    raise SchemaError(f"{a.kind}({a.column!r}) of a list column ({dt})", site=site)
            if a.kind in ("top_k", "arg_max"):
                assert a.column is not None and a.k is not None
                by = a.by if a.by is not None else a.column
                _check_keys(c.schema, [by], site, f"{a.kind}(by=)")
                ranked.append((name, a.k, by))
            types[name] = agg_type(a, c.schema)
            specs.append((name, a.kind, a.column))
        return c._add(
            "reduce",
            [],
            Schema(types),
            site,
            kind="agg",
            keys=tuple(self.keys),
            aggs=tuple(specs),
            ranked=tuple(ranked),
            fn=None,
        )

    def reduce(
        self,
        fn: Callable[[Any, list[tuple[tuple[Any, ...], int]]], Iterable[Any]],
        schema: Mapping[str, Any],
    ) -> Collection:
        """Apply ``fn(key, group)`` to every group; ``group`` is a list of ``(values, count)``
        (the non-key columns of each record with positive multiplicity, and that
        multiplicity); ``fn`` returns the output rows (tuples of the ``schema`` columns, which
        follow the key columns in the output)."""
        site = call_site()
        c = self.collection
        out = Schema(schema)
        types: dict[str, Any] = {k: c.schema[k] for k in self.keys}
        for name, dt in out.items():
            if name in types:
                raise SchemaError(
                    f"reduce output column {name!r} clashes with a key column", site=site
                )
            types[name] = dt
        return c._add(
            "reduce",
            [],
            Schema(types),
            site,
            kind="reduce",
            keys=tuple(self.keys),
            fn=fn,
            values=tuple(n for n in c.schema.names if n not in self.keys),
            outputs=tuple(out.names),
        )


# ---------------------------------------------------------------------- helpers


def _base_types(schema: Schema) -> list[tuple[str, Any]]:
    """Column names and types, nullability aside."""
    return [(n, dt.polars) for n, dt in schema.items()]


def _as_list(x: str | Sequence[str]) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


def _check_columns(schema: Schema, names: Sequence[str], site: CallSite | None, what: str) -> None:
    for n in names:
        if n not in schema:
            raise SchemaError(
                f"{what}: unknown column {n!r}; the columns are {', '.join(schema.names)}",
                site=site,
            )


def _check_keys(schema: Schema, names: Sequence[str], site: CallSite | None, what: str) -> None:
    """Key columns exist and are not lists (a list is a value, never a key)."""
    _check_columns(schema, names, site, what)
    for n in names:
        if schema[n].kind == "list":
            raise SchemaError(
                f"{what}: column {n!r} is a {schema[n]}, and a list cannot be a key (group, "
                "join, arrange or distinct on other columns)",
                site=site,
            )


def _join_keys(
    left: Collection, right: Collection, on: Any, left_on: Any, right_on: Any, site: CallSite | None
) -> tuple[list[str], list[str]]:
    if on is not None:
        if left_on is not None or right_on is not None:
            raise GraphError("give either on= or left_on=/right_on=, not both", site=site)
        lk = rk = _as_list(on)
    elif left_on is not None and right_on is not None:
        lk, rk = _as_list(left_on), _as_list(right_on)
    else:
        raise GraphError("join needs on= or both left_on= and right_on=", site=site)
    if len(lk) != len(rk) or not lk:
        raise GraphError(f"join keys {lk} and {rk} differ in number", site=site)
    _check_keys(left.schema, lk, site, "join (left)")
    _check_keys(right.schema, rk, site, "join (right)")
    for a, b in zip(lk, rk, strict=True):
        ta, tb = left.schema[a], right.schema[b]
        if ta.kind != tb.kind or (ta.kind != "int" and ta.polars != tb.polars):
            raise SchemaError(
                f"join key {a!r} ({ta}) and {b!r} ({tb}) have different types", site=site
            )
    return lk, rk


def _named_exprs(
    exprs: Sequence[Expr | str], named: Mapping[str, Any], site: CallSite | None
) -> list[tuple[str, Expr]]:
    for e in exprs:
        if not isinstance(e, (Expr, str)):
            raise ExpressionError(f"{e!r} is not a column expression or column name", site=site)
    items = named_exprs([*exprs, *named_exprs(dict(named))])
    return [(_name_of(e), e) for e in items]


def _name_of(e: Expr) -> str:
    name = e.output_name
    return str(name() if callable(name) else name)


def _output_schema(
    items: Sequence[tuple[str, Expr]], schema: Schema, site: CallSite | None
) -> Schema:
    for _, e in items:
        missing = expr_columns(e) - set(schema.names)
        if missing:
            # compile_polars raises the error that points at the col() call site
            compile_polars(e, schema)
    return output_schema([e for _, e in items], schema)


def _align(collections: Sequence[Collection], site: CallSite | None) -> list[Node]:
    """Bring collections into the innermost of their scopes."""
    flows = {id(c._flow) for c in collections}
    if len(flows) > 1:
        raise GraphError("collections of two different dataflows were combined", site=site)
    inner = collections[0].scope
    for c in collections[1:]:
        s = c.scope
        if inner.contains(s):
            inner = s
        elif not s.contains(inner):
            raise GraphError(
                "collections from two different loops were combined; a loop's collections "
                "can be used only inside it (use the loop's result outside)",
                site=site,
            )
    return _align_to(collections, inner, site)


def _align_to(collections: Sequence[Collection], scope: Scope, site: CallSite | None) -> list[Node]:
    out = []
    for c in collections:
        node = c._node
        if node.scope is not scope:
            if not node.scope.contains(scope):
                raise GraphError("a collection from an inner loop was used outside it", site=site)
            chain = [s for s in scope.ancestors() if node.scope.contains(s) and s is not node.scope]
            for s in reversed(chain):
                node = c._flow._enter(node, s, site)
        out.append(node)
    return out
