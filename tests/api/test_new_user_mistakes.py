"""Mistakes a new user made, each once reported as a bare Python error or at the wrong line:
every one is a :class:`~ddflow.DDFlowError` whose message names the problem and whose site is
the user's line that made it."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import pytest

import ddflow as dd
from ddflow import cbp


def _here() -> int:
    """The caller's line."""
    return sys._getframe(1).f_lineno


def _at(error: dd.DDFlowError, line: int) -> None:
    assert error.site is not None, error
    assert (error.site.filename, error.site.lineno) == (__file__, line), error.site


def test_a_checkpoint_path_that_is_a_file_is_refused_at_the_dataflow(tmp_path):
    path = tmp_path / "ckpt"
    path.write_text("not a directory")
    line = _here() + 2
    with pytest.raises(dd.CheckpointError, match="checkpoint path is a file") as info:
        dd.Dataflow(checkpoint=path)
    assert str(path) in str(info.value)
    _at(info.value, line)


def test_a_checkpoint_directory_that_cannot_be_made_is_refused_at_the_dataflow(tmp_path):
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "ckpt"
    line = _here() + 2
    with pytest.raises(dd.CheckpointError, match="checkpoint directory cannot be written") as info:
        dd.Dataflow(checkpoint=path)
    assert str(path) in str(info.value)
    _at(info.value, line)


def test_a_checkpoint_directory_is_made_and_left_empty(tmp_path):
    path = tmp_path / "new" / "ckpt"
    flow = dd.Dataflow(checkpoint=path)
    assert os.path.isdir(path) and not os.listdir(path)
    assert flow.restore() is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "number of workers >= 1, got 0"),
        ({"keep": 0}, "number of checkpoints >= 1"),
        ({"checkpoint_every": 2}, "checkpoint=DIR"),
    ],
)
def test_a_bad_dataflow_setting_is_a_configuration_error_at_its_line(
    kwargs: dict[str, Any], message: str
) -> None:
    line = _here() + 2
    with pytest.raises(dd.ConfigurationError, match=message) as info:
        dd.Dataflow(**kwargs)
    assert isinstance(info.value, ValueError)  # (as it was: code catching ValueError still does)
    _at(info.value, line)


def test_inserting_a_scalar_instead_of_rows_is_a_schema_error_at_its_line():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"a": "int64"})
    line = _here() + 2
    with pytest.raises(dd.SchemaError, match=r"iterable of rows .* got int 42") as info:
        xs.insert(42)
    _at(info.value, line)
    xs.insert([1])  # (the input still takes rows)


def _pair(record: tuple[Any, ...]) -> tuple[Any, ...]:
    return (record[0], "x")


def test_a_map_returning_a_record_of_the_wrong_type_names_the_function_and_the_map():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"a": "int64"})
    line = _here() + 1
    xs.map(_pair, schema={"a": "int64", "b": "int64"}).output()
    xs.insert([1, 2])
    flow.advance_to(1)
    with pytest.raises(dd.SchemaError) as info:
        flow.run()
    message = str(info.value)
    defined = f"{__file__}:{_pair.__code__.co_firstlineno}"
    assert f"the map function _pair (defined at {defined}) returned (1, 'x')" in message
    assert "for the record (1,)" in message and "expected int64, got str 'x'" in message
    _at(info.value, line)


def test_a_flat_map_returning_records_of_the_wrong_shape_names_the_function_and_the_map():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"a": "int64"})
    line = _here() + 1
    xs.flat_map(lambda r: [(r[0], 1, 2)], schema={"a": "int64", "b": "int64"}).output()
    xs.insert([5])
    flow.advance_to(1)
    with pytest.raises(dd.SchemaError) as info:
        flow.run()
    message = str(info.value)
    assert f"the flat_map function <lambda> (defined at {__file__}:{line})" in message
    assert "returned (5, 1, 2) for the record (5,)" in message
    assert "it has 3 values but the schema has 2 columns (a, b)" in message
    _at(info.value, line)


def test_a_cbp_translate_with_the_wrong_parameters_is_refused_at_the_stage():
    flow = dd.Dataflow()
    urls = flow.input("urls", schema={"site": "str"})

    def translate(key, state, out):  # (flows forgotten)
        pass

    line = _here() + 2
    with pytest.raises(dd.GraphError, match=r"translate is called with 4 arguments") as info:
        cbp.stage("count", translate, key={"site": "str"}, inputs={"urls": urls})
    assert "translate(key, state, out)" in str(info.value)
    _at(info.value, line)


def test_a_cbp_stage_key_that_an_input_lacks_names_the_input_and_column():
    flow = dd.Dataflow()
    urls = flow.input("urls", schema={"url": "str"})
    line = _here() + 2
    with pytest.raises(dd.GraphError, match="input 'urls' has no column 'site'") as info:
        cbp.stage("count", lambda k, s, f, o: None, key={"site": "str"}, inputs={"urls": urls})
    _at(info.value, line)
    # (a flow routed by the whole record says so)
    cbp.stage(
        "count",
        lambda k, s, f, o: None,
        key={"site": "str"},
        inputs={"urls": cbp.Flow(urls, route_by=cbp.RouteByRcd)},
    )


#: public classes whose objects ddflow makes, not the user (the call that makes them)
MADE_BY_DDFLOW = {
    "Arranged": "collection.arrange(...)",
    "Collection": "flow.input(...) and every operator",
    "Expr": "dd.col(...), dd.lit(...) and operators on them",
    "GroupBy": "collection.group_by(...)",
    "InputCollection": "flow.input(...)",
    "Output": "collection.output()",
    "Probe": "collection.probe()",
    "Stage": "cbp.stage(...)",
}


def test_every_public_constructor_documents_its_parameters():
    """Regression: ``help(dd.Dataflow)`` did not describe ``workers``, ``processes``,
    ``checkpoint``, ``checkpoint_every`` or ``keep``. Every class a user constructs names each
    of its parameters in its docstring."""
    import importlib
    import inspect

    modules = ["ddflow", "ddflow.io", "ddflow.io.spark", "ddflow.cbp", "ddflow.graph"]
    modules += ["ddflow.testing", "ddflow.runtime.local.settings"]
    checked, undocumented = 0, []
    for name in modules:
        module = importlib.import_module(name)
        for attr in module.__all__:
            cls = getattr(module, attr)
            if not inspect.isclass(cls) or issubclass(cls, BaseException):
                continue
            if attr in MADE_BY_DDFLOW:
                continue
            try:
                parameters = inspect.signature(cls).parameters
            except (TypeError, ValueError):
                continue
            init = cls.__dict__.get("__init__")
            doc = (cls.__doc__ or "") + (getattr(init, "__doc__", None) or "")
            checked += 1
            undocumented += [
                f"{name}.{attr}: {p}"
                for p in parameters
                if p not in ("args", "kwargs") and not re.search(rf"\b{p}\b", doc)
            ]
    assert checked >= 15, checked
    assert not undocumented, undocumented


def test_a_count_column_is_refused_at_output_never_renamed_silently():
    """Regression: the multiplicity column of ``snapshot()`` became ``multiplicity`` when
    the data had a column named ``count``, so ``snap["count"]`` silently read the user's
    column. The multiplicity column is always the name ``output(count=...)`` gives it."""
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"word": "str"})
    counted = xs.group_by("word").agg(count=dd.count())
    line = _here() + 2
    with pytest.raises(dd.SchemaError, match=r"multiplicity column is named 'count'") as info:
        counted.output()
    _at(info.value, line)
    out = counted.output(count="multiplicity")
    plain = xs.output()
    xs.insert(["a", "a", "b"])
    flow.advance_to(1)
    flow.run()
    snap = out.snapshot()
    assert list(snap.columns) == ["word", "count", "multiplicity"]
    assert snap.sort_values("word")[["count", "multiplicity"]].values.tolist() == [[2, 1], [1, 1]]
    assert list(plain.snapshot().columns) == ["word", "count"]


def test_every_reader_gives_pandas_and_polars_on_request(tmp_path):
    """Regression: ``snapshot()`` returned pandas while ``read_change_log()`` returned
    Polars. Each reader gives pandas, and Polars with ``polars=True``, holding the same."""
    import polars as pl

    from ddflow.io import spark as io

    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "v": "int64?"})
    out = xs.output()
    io.ParquetChangeLog(out, str(tmp_path / "log"))
    seen: dict[bool, list[Any]] = {False: [], True: []}
    out.subscribe(seen[False].append)
    out.subscribe(seen[True].append, polars=True)
    xs.insert([(1, None), (2, 5)])
    flow.advance_to(1)
    flow.run()
    readers = {
        "snapshot": lambda polars: out.snapshot(polars=polars),
        "changes": lambda polars: out.changes(polars=polars),
        "subscribe": lambda polars: seen[polars][-1],
        "read_change_log": lambda polars: io.read_change_log(str(tmp_path / "log"), polars=polars),
    }
    for name, read in readers.items():
        as_pandas, as_polars = read(False), read(True)
        assert isinstance(as_polars, pl.DataFrame), name
        assert type(as_pandas).__module__.startswith("pandas"), name
        assert str(as_pandas["v"].dtype) == "Int64", name  # (nulls stay nulls)
        back = pl.from_pandas(as_pandas).select(as_polars.columns).cast(as_polars.schema)
        assert back.sort("k").equals(as_polars.sort("k")), name
