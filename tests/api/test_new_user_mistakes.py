"""Mistakes a new user made, each once reported as a bare Python error or at the wrong line:
every one is a :class:`~ddflow.DDFlowError` whose message names the problem and whose site is
the user's line that made it."""

from __future__ import annotations

import os
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
