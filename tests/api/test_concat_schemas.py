"""``concat`` of collections whose columns differ only in nullability is nullable where any of
them is (it was typed as the first collection, so a null from another reached a column typed
as never null: ``changes()`` then gave an int64 column as floats)."""

from __future__ import annotations

import ddflow as dd
from ddflow.testing import frame_to_counter


def test_concat_is_nullable_where_any_input_is() -> None:
    flow = dd.Dataflow()
    a = flow.input("a", schema={"k": "int64"})
    b = flow.input("b", schema={"k": "int64?"})
    both = a.concat(b)
    assert str(both.schema["k"]) == "int64?"
    out = both.output()
    a.insert([2**63 - 1])
    b.insert([None])
    flow.advance_to(1)
    flow.run()
    assert frame_to_counter(out.snapshot(epoch=0)) == {(2**63 - 1,): 1, (None,): 1}
    ks = out.changes()["k"]
    assert str(ks.dtype) == "Int64" and ks.dropna().tolist() == [2**63 - 1]
