"""The plan generator: it draws a random plan operation by operation, applying each one to a
scratch dataflow as it is drawn (so that schemas are exact and a mistake surfaces here) and
recording its code.

For each collection it makes (``_Item``) it knows what the invariants of
:func:`~ddflow.testing.strategies.plans` need: whether its multiplicities may be negative, the
loops with converging bodies whose variables it depends on (only operations of finite range are
then applied to it), its int columns small enough to be summed without overflow, and a bound on
its multiplicities in bits: a collection that could outgrow ``_MAX_BITS`` is clamped with a
``threshold``.
"""

from __future__ import annotations

import datetime
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import ddflow as dd
from ddflow.schema import Schema
from ddflow.testing.strategies.expressions import _Exprs
from ddflow.testing.strategies.plan import Plan
from ddflow.testing.strategies.row_functions import _HELPERS, _OPS_BY_TYPE, _VALUE_OPS
from ddflow.testing.strategies.update_streams import SIGNED_INPUTS

#: Multiplicities, in bits (``|m| < 2 ** bits``): plans assume input multiplicities below
#: ``2 ** _INPUT_BITS``; a collection that could go beyond ``_MAX_BITS`` (joins multiply, concats
#: add) is clamped to ``_CLAMP_BITS`` with a ``threshold``, and so are the variables of loops
#: whose bodies may grow them (to ``_LOOP_BITS``), so that neither a multiplicity nor a
#: ``sum`` of ``int32`` values weighted by one overflows an int64.
_INPUT_BITS, _MAX_BITS, _CLAMP_BITS, _LOOP_BITS = 10, 24, 12, 12


#: a non-null value of each kind, to fill the nulls a loop body may make (see ``_op_iterate``)
_FILLERS = {
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "str": "''",
    "date": "datetime.date(2000, 1, 1)",
    "datetime": "datetime.datetime(2000, 1, 1)",
}


@dataclass(frozen=True)
class _Options:
    max_ops: int
    max_depth: int
    extremes: bool
    spark: bool
    min_loops: int
    gaps: bool


@dataclass
class _Item:
    """A collection made while drawing a plan, with what the generator knows of it.

    ``neg``: None if its multiplicities may be negative, else the loops at whose iteration 0
    only they may be; ``conv``: the loops with converging bodies (see :func:`plans`) whose
    variables it depends on (it may then go through operations of finite range only);
    ``bounded``: int columns whose values are small enough to be summed without overflow;
    ``bits``: its multiplicities are below ``2 ** bits`` in absolute value."""

    name: str
    coll: dd.Collection
    neg: frozenset[int] | None
    conv: frozenset[int]
    bounded: frozenset[str]
    bits: int

    @property
    def schema(self) -> Schema:
        return self.coll.schema


def _union_neg(*items: _Item) -> frozenset[int] | None:
    if any(i.neg is None for i in items):
        return None
    return frozenset().union(*(i.neg for i in items))  # type: ignore[misc]


def _union_conv(*items: _Item) -> frozenset[int]:
    return frozenset().union(*(i.conv for i in items))


def _unused(name: str, taken: Iterable[str]) -> str:
    """``name``, with underscores appended until it is not one of ``taken``."""
    taken = set(taken)
    while name in taken:
        name += "_"
    return name


def _base(schema: Schema) -> list[tuple[str, Any]]:
    return [(n, t.polars) for n, t in schema.items()]


class _Generator:
    """Draws a plan operation by operation, applying each one to a scratch dataflow as it is
    drawn (so that schemas are exact and a mistake surfaces here) and recording its code."""

    def __init__(self, draw: st.DrawFn, options: _Options) -> None:
        self.draw = draw
        self.opt = options
        self.flow = dd.Dataflow()
        self.env: dict[str, Any] = {"dd": dd, "datetime": datetime, **_HELPERS}
        self.lines: list[str] = []
        self.indent = 1
        self.frames: list[list[_Item]] = [[]]
        self.counter = itertools.count()
        self.loop_ids = itertools.count(1)
        self.depth = 0
        self.loops = 0
        self._defined: dict[str, int] = {}

    # ------------------------------------------------------------------ bookkeeping

    def _emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def _run(self, target: str, code: str) -> Any:
        exec(f"{target} = {code}", self.env)
        self._defined[target] = len(self.lines)
        self._emit(f"{target} = {code}")
        return self.env[target]

    def _new(
        self,
        code: str,
        neg: frozenset[int] | None,
        conv: frozenset[int],
        bounded: Iterable[str] = (),
        prefix: str = "c",
        *,
        bits: int,
    ) -> _Item:
        """A new collection made by ``code``; one whose multiplicities could outgrow
        :data:`_MAX_BITS` is clamped (a ``threshold``) so that none overflows an int64."""
        name = f"{prefix}{next(self.counter)}"
        coll = self._run(name, code)
        kept = frozenset(b for b in bounded if b in coll.schema)
        item = _Item(name, coll, neg, conv, kept, bits)
        self.frames[-1].append(item)
        if bits > _MAX_BITS:
            return self._clamp(item, _CLAMP_BITS)
        return item

    def _clamp(self, item: _Item, bits: int) -> _Item:
        """``item`` with multiplicities limited to ``bits`` bits."""
        if item.bits <= bits:
            return item
        m = 2 ** (bits - 1)
        return self._new(
            f"{item.name}.threshold(Clamp({-m}, {m}))", item.neg, item.conv, item.bounded, bits=bits
        )

    def _visible(self) -> list[_Item]:
        return [i for frame in self.frames for i in frame]

    def _pick(self, items: Sequence[_Item] | None = None) -> _Item:
        items = list(items if items is not None else self._visible())
        # later collections more often, so that chains grow
        return self.draw(st.sampled_from(items[::-1][:3] * 2 + items[::-1]))

    def _pick_columns(self, schema: Schema, lo: int, hi: int) -> list[str]:
        names = list(schema.names)
        k = self.draw(st.integers(min(lo, len(names)), min(hi, len(names))))
        return self.draw(st.permutations(names))[:k]

    # ------------------------------------------------------------------ the plan

    def plan(
        self, schemas: dict[str, dict[str, str]], signed: frozenset[str], max_outputs: int
    ) -> Plan:
        self.env["flow"] = self.flow
        for name, schema in schemas.items():
            signs = ", signed=True" if name in signed and SIGNED_INPUTS else ""
            coll = self._run(name, f"flow.input({name!r}, schema={schema!r}{signs})")
            tame = not self.opt.extremes
            bounded = [c for c, t in coll.schema.items() if t.kind == "int" and tame]
            neg = None if name in signed else frozenset()
            self.frames[0].append(
                _Item(name, coll, neg, frozenset(), frozenset(bounded), _INPUT_BITS)
            )
        n = self.draw(st.integers(1, self.opt.max_ops))
        for i in range(max(n, self.opt.min_loops)):
            self._operation(loop=i >= n - self.opt.min_loops and self.loops < self.opt.min_loops)
        top = self.frames[0]
        # the collections nothing else reads first, so that every operation reaches an output
        sinks = [
            i
            for i in top
            if not any(
                re.search(rf"\b{i.name}\b", line)
                for line in self.lines[self._defined[i.name] + 1 :]
            )
        ]
        others = [i for i in top[::-1] if i not in sinks]
        outs = (sinks[::-1] + others)[: self.draw(st.integers(1, max_outputs))]
        names = [i.name for i in outs]
        self._emit(f"return [{', '.join(names)}]")
        source = "def build(flow):\n" + "\n".join(self.lines) + "\n"
        return Plan(schemas, source, self.opt.extremes, signed)

    _OPERATIONS = (
        "filter",
        "select",
        "with_columns",
        "distinct",
        "join",
        "outer_join",
        "limit",
        "agg",
        "concat",
        "map",
        "flat_map",
        "negate",
        "consolidate",
        "semijoin",
        "antijoin",
        "reduce",
        "threshold",
        "arrange",
        "iterate",
        "prioritized_iterate",
    )

    def _operation(self, chain: _Item | None = None, loop: bool = False) -> _Item:
        """One operation on ``chain`` (or on a collection picked among the visible ones); a loop
        if ``loop``."""
        src = chain if chain is not None else self._pick()
        finite = bool(src.conv)
        ops = list(self._OPERATIONS) if not loop else ["iterate", "prioritized_iterate"]
        if self.depth > 0:  # inside a loop body: nested loops more often
            ops += ["iterate", "iterate", "prioritized_iterate"]
        if self.depth >= self.opt.max_depth:
            ops = [o for o in ops if not o.endswith("iterate")]
        op = self.draw(st.sampled_from(ops))
        made = getattr(self, "_op_" + op)(src, finite)
        return made if made is not None else src

    # ------------------------------------------------------------------ linear operators

    def _op_filter(self, src: _Item, finite: bool) -> _Item:
        pred = _Exprs(self, src.schema, finite).of_kind("bool", 2)
        return self._new(
            f"{src.name}.filter({pred})", src.neg, src.conv, src.bounded, bits=src.bits
        )

    def _op_select(self, src: _Item, finite: bool) -> _Item:
        kept = self._pick_columns(src.schema, 0, 3)
        exprs = _Exprs(self, src.schema, finite)
        computed = []
        used = set(kept)
        for _ in range(self.draw(st.integers(0 if kept else 1, 2))):
            name = self._fresh_column(used)
            used.add(name)
            computed.append(f"{name}={exprs.any_kind(2)}")
        args = ", ".join([repr(k) for k in kept] + computed)
        return self._new(
            f"{src.name}.select({args})", src.neg, src.conv, src.bounded, bits=src.bits
        )

    def _op_with_columns(self, src: _Item, finite: bool) -> _Item:
        exprs = _Exprs(self, src.schema, finite)
        parts = []
        used: set[str] = set()
        for _ in range(self.draw(st.integers(1, 2))):
            replace = [n for n in src.schema.names if n not in used]
            if replace and self.draw(st.booleans()):
                name = self.draw(st.sampled_from(replace))
            else:
                name = self._fresh_column(set(src.schema.names) | used)
            used.add(name)
            parts.append(f"{name}={exprs.any_kind(2)}")
        bounded = src.bounded - used
        return self._new(
            f"{src.name}.with_columns({', '.join(parts)})",
            src.neg,
            src.conv,
            bounded,
            bits=src.bits,
        )

    def _fresh_column(self, used: set[str]) -> str:
        pool = [n for n in ["y", "q", "r", "p", "m2", "y2", "q2"] if n not in used]
        return self.draw(st.sampled_from(pool)) if pool else f"col{next(self.counter)}"

    def _map_ops(self, schema: Schema, finite: bool, lo: int = 1) -> tuple[tuple[int, str], ...]:
        names = list(schema.names)
        ops = []
        for _ in range(self.draw(st.integers(lo, min(3, len(names) + 1)))):
            i = self.draw(st.integers(0, len(names) - 1))
            t = schema.dtypes[i]
            choices = [o for o in _OPS_BY_TYPE[t.name] if _VALUE_OPS[o][1] or not finite]
            if t.nullable:
                choices.append("null")
            ops.append((i, self.draw(st.sampled_from(choices))))
        return tuple(ops)

    def _map_schema(self, schema: Schema, ops: tuple[tuple[int, str], ...]) -> dict[str, str]:
        # nullable: a collection may hold nulls where its schema says it does not (a concat with
        # a nullable input, a loop whose body makes nulls, a min of nulls)
        out: dict[str, str] = {}
        for j, (i, _) in enumerate(ops):
            name = schema.names[i]
            out[name if name not in out else f"{name}{j}"] = schema.dtypes[i].name + "?"
        return out

    def _op_map(self, src: _Item, finite: bool) -> _Item:
        ops = self._map_ops(src.schema, finite)
        schema = self._map_schema(src.schema, ops)
        return self._new(
            f"{src.name}.map(MapColumns({ops!r}), schema={schema!r})",
            src.neg,
            src.conv,
            bits=src.bits,
        )

    def _op_flat_map(self, src: _Item, finite: bool) -> _Item:
        ops = self._map_ops(src.schema, finite)
        schema = self._map_schema(src.schema, ops)
        mode = self.draw(st.sampled_from(["one", "dup", "some", "both"]))
        return self._new(
            f"{src.name}.flat_map(FlatMapColumns({ops!r}, {mode!r}), schema={schema!r})",
            src.neg,
            src.conv,
            bits=src.bits + (mode in ("dup", "both")),
        )

    def _op_concat(self, src: _Item, finite: bool) -> _Item:
        other = self._conform(self._pick(), src.schema)
        return self._new(
            f"{src.name}.concat({other.name})",
            _union_neg(src, other),
            _union_conv(src, other),
            src.bounded & other.bounded,
            bits=max(src.bits, other.bits) + 1,
        )

    def _op_negate(self, src: _Item, finite: bool) -> _Item:
        return self._new(f"{src.name}.negate()", None, src.conv, src.bounded, bits=src.bits)

    def _op_consolidate(self, src: _Item, finite: bool) -> _Item:
        return self._new(f"{src.name}.consolidate()", src.neg, src.conv, src.bounded, bits=src.bits)

    def _conform(self, item: _Item, target: Schema) -> _Item:
        """``item`` made to have ``target``'s columns and types (nullability aside): a select of
        its columns of the same types, expressions of finite range or literals."""
        if _base(item.schema) == _base(target):
            return item
        finite = bool(item.conv)
        exprs = _Exprs(self, item.schema, finite)
        parts = [f"{name}={exprs.of_type(t)}" for name, t in target.items()]
        return self._new(
            f"{item.name}.select({', '.join(parts)})", item.neg, item.conv, bits=item.bits
        )

    # ------------------------------------------------------------------ joins

    def _key_pairs(self, left: Schema, right: Schema) -> list[tuple[str, str]]:
        pairs = [
            (a, b)
            for a, ta in left.items()
            for b, tb in right.items()
            if ta.kind == tb.kind and (ta.kind == "int" or ta.polars == tb.polars)
        ]
        if not pairs:
            return []
        # equal names first: joins on "k" are the common case
        pairs.sort(key=lambda p: p[0] != p[1])
        first = self.draw(st.sampled_from(pairs[:2] + pairs))
        more = [p for p in pairs if p[0] != first[0] and p[1] != first[1]]
        if more and self.draw(st.integers(0, 3)) == 0:
            return [first, self.draw(st.sampled_from(more))]
        return [first]

    def _keys_code(self, pairs: list[tuple[str, str]]) -> str:
        left, right = [a for a, _ in pairs], [b for _, b in pairs]
        if left == right:
            return f"on={left[0]!r}" if len(left) == 1 else f"on={left!r}"
        return f"left_on={left!r}, right_on={right!r}"

    def _suffix(self, left: Schema, right: Schema, right_keys: list[str]) -> str:
        names = set(left.names)
        for suffix in ["_right", "_r2", "_r3", "_r4", "_r5"]:
            out = [c if c not in names else c + suffix for c in right.names if c not in right_keys]
            if len(set(out)) == len(out) and not names & {
                c + suffix for c in right.names if c in names
            }:
                return suffix
        return f"_r{next(self.counter)}"

    def _join(
        self, left: _Item, right: _Item, pairs: list[tuple[str, str]], how: str = "inner"
    ) -> _Item:
        suffix = self._suffix(left.schema, right.schema, [b for _, b in pairs])
        tail = "" if suffix == "_right" else f", suffix={suffix!r}"
        if how != "inner":
            tail += f", how={how!r}"
        neg = _union_neg(left, right) if None not in (left.neg, right.neg) else None
        made = self._new(
            f"{left.name}.join({right.name}, {self._keys_code(pairs)}{tail})",
            neg,
            _union_conv(left, right),
            left.bounded if how == "inner" else (),
            # (an outer join adds the unmatched records of each side to the inner join's)
            bits=left.bits + right.bits + (0 if how == "inner" else 2),
        )
        if len(made.schema) > 5:  # keep records narrow: joins of joins grow wide
            keep = self._pick_columns(made.schema, 1, 4)
            made = self._new(
                f"{made.name}.select({', '.join(map(repr, keep))})",
                made.neg,
                made.conv,
                made.bounded,
                bits=made.bits,
            )
        return made

    def _op_join(self, src: _Item, finite: bool) -> _Item | None:
        other = self._pick()
        if self.draw(st.booleans()):
            src, other = other, src
        pairs = self._key_pairs(src.schema, other.schema)
        return self._join(src, other, pairs) if pairs else None

    def _op_outer_join(self, src: _Item, finite: bool) -> _Item | None:
        """A left or full outer join, on keys of one type (an outer join's keys are one
        column)."""
        other = self._pick()
        pairs = [
            (a, b)
            for a, b in self._key_pairs(src.schema, other.schema)
            if src.schema[a].polars == other.schema[b].polars
        ]
        if not pairs:
            return None
        return self._join(src, other, pairs, self.draw(st.sampled_from(["left", "outer"])))

    def _op_semijoin(self, src: _Item, finite: bool, anti: bool = False) -> _Item | None:
        other = self._pick()
        pairs = self._key_pairs(src.schema, other.schema)
        if not pairs:
            return None
        op = "antijoin" if anti else "semijoin"
        return self._new(
            f"{src.name}.{op}({other.name}, {self._keys_code(pairs)})",
            src.neg,
            _union_conv(src, other),
            src.bounded,
            bits=src.bits,
        )

    def _op_antijoin(self, src: _Item, finite: bool) -> _Item | None:
        return self._op_semijoin(src, finite, anti=True)

    def _op_arrange(self, src: _Item, finite: bool) -> _Item | None:
        """An arrangement shared by two joins (as the left input of one, the right of the
        other), then the concat of the two joins' results, made alike."""
        first, second = self._pick(), self._pick()
        pairs1 = self._key_pairs(src.schema, first.schema)
        if not pairs1:
            return None
        keys = [a for a, _ in pairs1]
        pairs2 = [(b, a) for a, b in self._key_pairs(src.schema.select(keys), second.schema)]
        if [b for _, b in pairs2] != keys:
            pairs2 = [(a, a) for a in keys]
            second = src
        arranged = self._new(
            f"{src.name}.arrange({keys!r})",
            src.neg,
            src.conv,
            src.bounded,
            prefix="arr",
            bits=src.bits,
        )
        # (the arrangement stays available to later operators, which read it as a collection)
        j1 = self._join(arranged, first, pairs1)
        j2 = self._join(second, arranged, pairs2)
        return j1 if self.draw(st.booleans()) else self._concat_two(j1, j2)

    def _concat_two(self, a: _Item, b: _Item) -> _Item:
        b2 = self._conform(b, a.schema)
        return self._new(
            f"{a.name}.concat({b2.name})",
            _union_neg(a, b2),
            _union_conv(a, b2),
            bits=max(a.bits, b2.bits) + 1,
        )

    # ------------------------------------------------------------------ reductions

    def _op_limit(self, src: _Item, finite: bool) -> _Item:
        """The first few records in an order of some columns (``order_by(...).limit(n)``)."""
        names = [c for c, t in src.schema.items() if t.kind != "list"]
        if not names:
            return self._op_distinct(src, finite)
        by = self.draw(st.permutations(names))[: self.draw(st.integers(1, min(2, len(names))))]
        descending = self.draw(st.booleans())
        n = self.draw(st.integers(1, 4))
        flag = ", descending=True" if descending else ""
        return self._new(
            f"{src.name}.order_by({', '.join(map(repr, by))}{flag}).limit({n})",
            frozenset(),
            src.conv,
            src.bounded,
            bits=4,
        )

    def _op_distinct(self, src: _Item, finite: bool) -> _Item:
        return self._new(f"{src.name}.distinct()", frozenset(), src.conv, src.bounded, bits=1)

    def _op_threshold(self, src: _Item, finite: bool) -> _Item:
        fn = self.draw(
            st.sampled_from(
                ["Clamp(0, 1)", "Clamp(-1, 1)", "Clamp(0, 2)", "Scale(2)", "Halve()", "Abs()"]
            )
        )
        positive = fn.startswith(("Clamp(0", "Abs"))
        neg = frozenset() if positive else (src.neg if fn in ("Scale(2)", "Halve()") else None)
        bits = {"Scale(2)": src.bits + 1, "Halve()": src.bits, "Abs()": src.bits}.get(fn, 2)
        return self._new(f"{src.name}.threshold({fn})", neg, src.conv, src.bounded, bits=bits)

    def _op_agg(self, src: _Item, finite: bool) -> _Item:
        schema = src.schema
        keys = self._pick_columns(schema, 0 if len(schema) > 1 else 1, 2)
        if not keys:
            keys = [schema.names[0]]
        rest = [c for c in schema.names if c not in keys]
        aggs: list[str] = []
        bounded = []
        kinds = ["min", "max"] if finite else ["count", "min", "max", "sum", "mean"]
        for _ in range(self.draw(st.integers(1, 3))):
            kind = self.draw(st.sampled_from(kinds))
            if kind == "count":
                name = _unused(f"n{len(aggs)}", keys)
                aggs.append(f"{name}=dd.count()")
                bounded.append(name)
                continue
            cols = rest
            if kind in ("sum", "mean"):
                cols = [c for c in rest if schema[c].name == "int32" or c in src.bounded]
            if not cols:
                continue
            c = self.draw(st.sampled_from(cols))
            name = _unused(f"{kind}_{c}{len(aggs)}", keys)
            aggs.append(f"{name}=dd.{kind}({c!r})")
            if kind in ("min", "max") and c in src.bounded:
                bounded.append(name)
        if not aggs and not finite:
            aggs = [f"{_unused('n', keys)}=dd.count()"]
            bounded.append(_unused("n", keys))
        if not aggs:  # a finite context with nothing to take the min of: distinct keys
            return self._new(
                f"{src.name}.select({', '.join(map(repr, keys))}).distinct()",
                frozenset(),
                src.conv,
                src.bounded,
                bits=1,
            )
        group = ", ".join(map(repr, keys))
        return self._new(
            f"{src.name}.group_by({group}).agg({', '.join(aggs)})",
            frozenset(),
            src.conv,
            [*bounded, *(k for k in keys if k in src.bounded)],
            bits=1,
        )

    def _op_reduce(self, src: _Item, finite: bool) -> _Item:
        schema = src.schema
        keys = self._pick_columns(schema, 1, 2)
        if not keys:
            keys = [schema.names[0]]
        rest = [c for c in schema.names if c not in keys]
        fns = ["LeastValue", "OddValues"] if rest else []
        if not finite:
            fns += ["GroupSize", "DistinctValues"]
        if not fns:
            return self._op_distinct(src, finite)
        fn = self.draw(st.sampled_from(fns))
        if fn == "LeastValue":
            i = self.draw(st.integers(0, len(rest) - 1))
            code, out = f"LeastValue({i})", {f"least_{rest[i]}": schema[rest[i]].name + "?"}
        elif fn == "OddValues":
            code, out = "OddValues()", {f"odd_{c}": schema[c].name + "?" for c in rest}
        else:
            code, out = f"{fn}()", {"size" if fn == "GroupSize" else "values": "int64"}
        out = {_unused(n, keys): t for n, t in out.items()}
        group = ", ".join(map(repr, keys))
        return self._new(
            f"{src.name}.group_by({group}).reduce({code}, schema={out!r})",
            frozenset(),
            src.conv,
            [k for k in keys if k in src.bounded],
            bits=1,
        )

    # ------------------------------------------------------------------ loops

    def _op_iterate(self, src: _Item, finite: bool, prioritized: bool = False) -> _Item:
        lid = next(self.loop_ids)
        self.loops += 1
        converging = finite or self.draw(st.integers(0, 2)) > 0
        limit = (
            self.draw(st.sampled_from([None, None, 1, 2, 3, 4]))
            if converging
            else self.draw(st.integers(1, 4))
        )
        if not converging:  # its body may grow multiplicities: it starts and ends clamped
            src = self._clamp(src, _LOOP_BITS)
        body, var = f"body{lid}", f"x{lid}"
        conv = src.conv | ({lid} if converging else _union_conv(*self._visible()))
        var_neg = (frozenset({lid}) if src.neg is None else src.neg | {lid}) if converging else None
        result: list[_Item] = []

        def make_body(x: dd.Collection) -> dd.Collection:
            self.env[var] = x
            # (a prioritized loop's variable adds the records of a priority to the result)
            bits = src.bits if converging else _LOOP_BITS + 2
            item = _Item(var, x, var_neg, conv, src.bounded, bits)
            self.frames.append([item])
            self.indent += 1
            self.depth += 1
            made = self._body(item, lid, converging)
            # a body may not return nulls where the loop's input never holds them
            widened = [
                n
                for n, t in made.coll.schema.items()
                if t.nullable and not src.coll.schema[n].nullable
            ]
            if widened:
                kinds = {n: src.coll.schema[n].kind for n in widened}
                fills = ", ".join(
                    f"{n}=dd.col({n!r}).fill_null({_FILLERS[k]})" for n, k in kinds.items()
                )
                made = self._new(
                    f"{made.name}.with_columns({fills})",
                    made.neg,
                    made.conv,
                    made.bounded,
                    bits=made.bits,
                )
            self._emit(f"return {made.name}")
            self.depth -= 1
            self.indent -= 1
            self.frames.pop()
            result.append(made)
            return made.coll

        self.env[body] = make_body
        self._emit(f"def {body}({var}):")
        args = [body]
        if prioritized:
            args.append(f"priority={self._priority(src.schema)}")
        if limit is not None:
            args.append(f"max_iterations={limit}")
        method = "prioritized_iterate" if prioritized else "iterate"
        name = f"c{next(self.counter)}"
        coll = self._run(name, f"{src.name}.{method}({', '.join(args)})")
        made = result[0]
        neg = made.neg
        if neg is not None and lid in neg:
            neg = None if src.neg is None else (neg - {lid}) | src.neg
        item = _Item(
            name, coll, neg, (made.conv | src.conv) - {lid}, src.bounded, max(made.bits, src.bits)
        )
        self.frames[-1].append(item)
        return item

    def _op_prioritized_iterate(self, src: _Item, finite: bool) -> _Item:
        return self._op_iterate(src, finite, prioritized=True)

    def _priority(self, schema: Schema) -> str:
        """A non-negative, non-null integer expression of a record."""
        options = ["dd.lit(0)"]
        for name, t in schema.items():
            c = f"dd.col({name!r})"
            if t.kind == "int":
                options += [f"({c} % 4).fill_null(0)", f"({c}.abs() % 3).fill_null(1)"]
            elif t.kind == "bool":
                options.append(f"dd.when({c}).then(1).otherwise(0)")
            elif t.kind == "float":
                options.append(f"dd.when({c} > 0).then(2).otherwise(0)")
            elif t.kind == "str":
                options.append(f"({c}.str.len() % 3).fill_null(0)")
            elif t.kind in ("date", "datetime"):
                options.append(f"({c}.dt.year() % 2).fill_null(0)")
        return self.draw(st.sampled_from(options[1:] + options))

    def _body(self, x: _Item, lid: int, converging: bool) -> _Item:
        """A loop body: a collection of ``x``'s schema. Converging: one that grows ``x`` within a
        finite set (or an idempotent function of ``x``); else: any."""
        forms = ["grow", "grow", "least", "idempotent"] if converging else ["any"]
        form = self.draw(st.sampled_from(forms))
        if form == "idempotent":
            op = self.draw(
                st.sampled_from(["filter", "distinct", "semijoin", "antijoin", "identity"])
            )
            if op == "identity":
                return x
            made = getattr(self, "_op_" + op)(x, True)
            return made if made is not None else x
        g = x
        for _ in range(self.draw(st.integers(1, 3))):
            g = self._operation(g)
        g = self._conform(g, x.schema)
        if form == "any":
            if self.draw(st.booleans()):
                other = self._conform(self._pick(), x.schema)
                g = self._new(
                    f"{g.name}.concat({other.name})",
                    _union_neg(g, other),
                    _union_conv(g, other),
                    bits=max(g.bits, other.bits) + 1,
                )
            return self._clamp(g, _LOOP_BITS)
        if g.neg is None or not g.neg <= {lid}:  # may be negative: only its records count
            g = self._new(f"{g.name}.distinct()", frozenset(), g.conv, bits=1)
        grown = f"{x.name}.concat({g.name})"
        if form == "least" and len(x.schema) > 1:
            v = self.draw(st.sampled_from(list(x.schema.names)))
            keys = [c for c in x.schema.names if c != v]
            agg = self.draw(st.sampled_from(["min", "max"]))
            code = f"{grown}.group_by({', '.join(map(repr, keys))}).agg({v}=dd.{agg}({v!r}))"
            if [*keys, v] != list(x.schema.names):
                code += f".select({', '.join(map(repr, x.schema.names))})"
            return self._new(code, frozenset(), _union_conv(x, g), bits=1)
        return self._new(f"{grown}.distinct()", frozenset(), _union_conv(x, g), bits=1)
