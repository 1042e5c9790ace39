"""Random column expressions of random plans (``_Exprs``): drawn as code over a schema, and
typed with ``output_dtype`` as they are drawn.

Invariants: an expression drawn of a kind (``int``, ``float``, ``bool``, ``str``, ``date``,
``datetime``) has that kind; in a ``finite`` context only operations of finite range are drawn
(applied again and again to a value, they reach finitely many values), for collections that
feed a loop without ``max_iterations``; a float divisor is never zero; unless the plan asks for
them (``gaps``), no expression meets a known gap of the local runtime; for Spark, no ``**``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hypothesis import strategies as st

from ddflow.expr.nodes import Expr, output_dtype
from ddflow.schema import DType, Schema

if TYPE_CHECKING:
    from ddflow.testing.strategies.generator import _Generator


_LITERALS: dict[str, list[str]] = {
    "int": ["0", "1", "2", "3", "-1", "7"],
    "float": ["0.5", "-1.5", "2.0", "0.1", "0.0"],
    "bool": ["True", "False"],
    "str": ['"a"', '""', '"ab"', '"1"'],
    "date": ["datetime.date(2000, 1, 1)", "datetime.date(1999, 12, 31)"],
    "datetime": ["datetime.datetime(2000, 1, 1, 12, 30)", "datetime.datetime(2000, 1, 1)"],
}
_KIND_OF = {
    "int64": "int",
    "int32": "int",
    "float64": "float",
    "float32": "float",
    "bool": "bool",
    "str": "str",
    "date": "date",
    "datetime": "datetime",
}


#: how much more often than others some operations are drawn (arithmetic, comparisons)
_WEIGHTS = {"arith": 3, "div": 2, "floordiv": 2, "mod": 2, "compare": 2, "compare2": 2, "and": 2}


class _Exprs:
    """Random column expressions over a schema, as code, typed with ``output_dtype``.

    ``finite``: only operations of finite range (applied again and again to a value, they reach
    finitely many values: column copies, comparisons, ``abs``, negation, ``% k``, ``clip``,
    ``least``/``greatest``/``coalesce``/``when`` of such, casts, string length, ...), for
    collections that feed a loop without ``max_iterations``."""

    def __init__(self, gen: _Generator, schema: Schema, finite: bool) -> None:
        self.gen = gen
        self.draw = gen.draw
        self.schema = schema
        self.finite = finite
        self.cols: dict[str, list[str]] = {}
        for name, t in schema.items():
            self.cols.setdefault(t.kind, []).append(name)

    def dtype(self, code: str) -> DType:
        expr = eval(code, self.gen.env)
        assert isinstance(expr, Expr), code
        return output_dtype(expr, self.schema)

    def any_kind(self, depth: int) -> str:
        kinds = list(self.cols) * 3 + ["int", "float", "bool", "str"]
        return self.of_kind(self.draw(st.sampled_from(kinds)), depth)

    def of_type(self, t: DType) -> str:
        """An expression whose values have the Polars type of ``t``."""
        same = [n for n, u in self.schema.items() if u.polars == t.polars]
        kind = t.kind
        options = [f"dd.col({n!r})" for n in same]
        options.append(f"{self.of_kind(kind, 1)}")
        code = self.draw(st.sampled_from(options))
        if self.dtype(code).polars != t.polars:
            code = f"{code}.cast({t.name!r})"
            if self.dtype(code).polars != t.polars:  # pragma: no cover (a generator mistake)
                raise AssertionError(f"cannot make {t} from {code}")
        return code

    def _col(self, kind: str) -> str | None:
        names = self.cols.get(kind)
        return f"dd.col({self.draw(st.sampled_from(names))!r})" if names else None

    def _leaf(self, kind: str) -> str:
        col = self._col(kind)
        lit = f"dd.lit({self.draw(st.sampled_from(_LITERALS[kind]))})"
        if col is None:
            return lit
        return self.draw(st.sampled_from([col, col, col, col, lit]))

    def of_kind(self, kind: str, depth: int) -> str:
        """An expression of the kind ``kind`` (``int``, ``float``, ``bool``, ``str``, ``date``,
        ``datetime``), at most ``depth`` operations deep."""
        if depth <= 0:
            return self._leaf(kind)
        makers = getattr(self, "_" + kind)()
        weighted = [m for m in makers for _ in range(_WEIGHTS.get(m, 1))]
        name = self.draw(st.sampled_from(["leaf", *weighted]))
        if name == "leaf":
            return self._leaf(kind)
        code = makers[name](depth - 1)
        if code is None or (not self.gen.opt.gaps and self._known_gap(code)):
            return self._leaf(kind)
        got = self.dtype(code)
        if _KIND_OF[got.name] != kind:  # pragma: no cover (a generator mistake)
            raise AssertionError(f"{code} is {got}, wanted {kind}")
        return code

    def _known_gap(self, code: str) -> bool:
        """Whether the expression meets a known gap of the local runtime (see
        :func:`plans`): arithmetic of literals alone, a float ``//`` or ``%`` by a divisor that
        reads no column, a division of something that reads no column."""
        for node in eval(code, self.gen.env).walk():
            if node.kind != "binary" or node.params[0] not in ("+", "-", "*", "/", "//", "%"):
                continue
            reads = [any(n.kind == "col" for n in a.walk()) for a in node.args]
            if not any(reads) or (node.params[0] == "/" and not reads[0]):
                return True
            if (
                node.params[0] in ("//", "%")
                and not reads[1]
                and output_dtype(node, self.schema).kind == "float"
            ):
                return True
        return False

    def _sub(self, kind: str, depth: int) -> str:
        return self.of_kind(kind, depth)

    def _pick_kind(self, kinds: list[str]) -> str:
        return str(self.draw(st.sampled_from(kinds)))

    def _num(self, depth: int) -> str:
        return self.of_kind(self.draw(st.sampled_from(["int", "int", "float"])), depth)

    def _common(self, kind: str) -> dict[str, Callable[[int], str | None]]:
        """Operations of finite range that make a value of ``kind`` from values of ``kind``."""
        k = kind
        lit = lambda: self.draw(st.sampled_from(_LITERALS[k]))  # noqa: E731
        ops: dict[str, Callable[[int], str | None]] = {
            "fill_null": lambda d: f"{self._sub(k, d)}.fill_null({lit()})",
            "coalesce": lambda d: f"dd.coalesce({self._sub(k, d)}, {self._sub(k, d)})",
            "when": lambda d: (
                f"dd.when({self._sub('bool', d)}).then({self._sub(k, d)})"
                f".otherwise({self._sub(k, d)})"
            ),
        }
        if k in ("int", "float", "str", "date"):
            ops["least"] = lambda d: f"dd.least({self._sub(k, d)}, {self._sub(k, d)})"
            ops["greatest"] = lambda d: f"dd.greatest({self._sub(k, d)}, {self._sub(k, d)})"
        return ops

    def _int(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("int")
        ops.update(
            {
                "neg": lambda d: f"(-{self._sub('int', d)})",
                "abs": lambda d: f"{self._sub('int', d)}.abs()",
                "mod_k": lambda d: (
                    f"({self._sub('int', d)} % {self.draw(st.sampled_from([2, 3, 5]))})"
                ),
                "clip": lambda d: f"{self._sub('int', d)}.clip(-2, 3)",
                "str_len": lambda d: (
                    f"{self._sub('str', d)}.str.len()" if "str" in self.cols else None
                ),
                "year": lambda d: (
                    f"{self._sub(self.draw(st.sampled_from(t)), d)}.dt.year()"
                    if (t := [k for k in ("date", "datetime") if k in self.cols])
                    else None
                ),
                "cast": lambda d: (
                    f"{self._sub(self._pick_kind(['float', 'bool', 'int']), d)}"
                    f".cast({self.draw(st.sampled_from(['int64', 'int32']))!r})"
                ),
                "parse": lambda d: (
                    f"{self._sub('str', d)}.cast('int64')" if "str" in self.cols else None
                ),
            }
        )
        if not self.finite:
            ops.update(
                {
                    "arith": lambda d: (
                        f"({self._sub('int', d)} "
                        f"{self.draw(st.sampled_from(['+', '-', '*']))} "
                        f"{self._sub('int', d)})"
                    ),
                    "floordiv": lambda d: f"({self._sub('int', d)} // {self._sub('int', d)})",
                    "mod": lambda d: f"({self._sub('int', d)} % {self._sub('int', d)})",
                }
            )
        return ops

    def _divisor(self, depth: int) -> str:
        """A divisor that is never a float zero, whose sign the quotient would show."""
        if self.draw(st.booleans()):
            return self._sub("int", depth)
        return f"({self._sub('float', depth)}.abs() + 1)"

    def _float(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("float")
        ops.update(
            {
                "neg": lambda d: f"(-{self._sub('float', d)})",
                "abs": lambda d: f"{self._sub('float', d)}.abs()",
                "round": lambda d: (
                    f"{self._sub('float', d)}.round({self.draw(st.sampled_from([0, 1, 2]))})"
                ),
                "clip": lambda d: f"{self._sub('float', d)}.clip(-1.5, 2.0)",
                "mod_k": lambda d: (
                    f"({self._sub('float', d)} % 2.5)" if self.gen.opt.gaps else None
                ),
                "cast": lambda d: (
                    f"{self._sub(self.draw(st.sampled_from(['int', 'float'])), d)}"
                    f".cast({self.draw(st.sampled_from(['float64', 'float32']))!r})"
                ),
            }
        )
        if not self.finite:
            ops.update(
                {
                    "arith": lambda d: (
                        f"({self._sub('float', d)} "
                        f"{self.draw(st.sampled_from(['+', '-', '*']))} "
                        f"{self._num(d)})"
                    ),
                    "div": lambda d: f"({self._num(d)} / {self._divisor(d)})",
                    "floordiv": lambda d: f"({self._sub('float', d)} // {self._divisor(d)})",
                }
            )
            if not self.gen.opt.spark:
                ops["pow"] = lambda d: (
                    f"({self._num(d)} ** {self.draw(st.sampled_from(['2', '3', '0.5']))})"
                )
        return ops

    def _comparable(self, depth: int) -> tuple[str, str]:
        kind = self.draw(st.sampled_from([*self.cols, "int", "float"]))
        left = self.of_kind(kind, depth)
        if kind in ("int", "float"):
            return left, self._num(depth)
        return left, self.of_kind(kind, depth)

    def _bool(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("bool")

        def compare(d: int) -> str:
            a, b = self._comparable(d)
            return f"({a} {self.draw(st.sampled_from(['==', '!=', '<', '<=', '>', '>=']))} {b})"

        ops.update(
            {
                "compare": compare,
                "compare2": compare,
                "is_null": lambda d: (
                    f"{self.of_kind(self.draw(st.sampled_from(list(self.cols))), d)}.is_null()"
                ),
                "not": lambda d: f"(~{self._sub('bool', d)})",
                "and": lambda d: f"({self._sub('bool', d)} & {self._sub('bool', d)})",
                "or": lambda d: f"({self._sub('bool', d)} | {self._sub('bool', d)})",
                "contains": lambda d: (
                    f"{self._sub('str', d)}.str.contains("
                    f"{self.draw(st.sampled_from(['a', 'b', '', 'Σ']))!r})"
                ),
            }
        )
        return ops

    def _str(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("str")
        ops.update(
            {
                "upper": lambda d: f"{self._sub('str', d)}.str.upper()",
                "cast": lambda d: (
                    f"{self._sub(self._pick_kind(['int', 'bool', 'date']), d)}.cast('str')"
                ),
            }
        )
        return ops

    def _date(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("date")
        if "datetime" in self.cols:
            ops["cast"] = lambda d: f"{self._sub('datetime', d)}.cast('date')"
        return ops

    def _datetime(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("datetime")
        if "date" in self.cols:
            ops["cast"] = lambda d: f"{self._sub('date', d)}.cast('datetime')"
        return ops
