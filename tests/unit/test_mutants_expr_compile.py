"""Checking ``when`` chains: cases that mutation testing (``python tools/mutation.py
expr_compile``) found no test pinning. Each test names the mutant of
``src/ddflow/expr/compiler.py`` it kills. Conditions and values past the first branch are what
the older tests never varied."""

from __future__ import annotations

import pytest

from ddflow.errors import ExpressionError
from ddflow.expr.nodes import col, lit, output_dtype, when
from ddflow.schema import Schema

S = Schema({"i": "int64?", "j": "int32", "s": "str?", "b": "bool?", "c": "bool"})


def test_when_without_otherwise_rejects_a_later_value_of_another_type():
    # mutants: _Checker.visit_when taking the values as ``args[2::2]`` or ``args[1::3]``
    # (the second branch's value never checked: int and str mixed without an error)
    e = when(col("b")).then(1).when(col("c")).then("x")
    with pytest.raises(ExpressionError, match="do not mix"):
        output_dtype(e, S)


def test_when_with_otherwise_rejects_a_later_value_of_another_type():
    # mutant: _Checker.visit_when taking the values before ``otherwise`` as ``args[1:-1:3]``
    e = when(col("b")).then(1).when(col("c")).then("x").otherwise(3)
    with pytest.raises(ExpressionError, match="do not mix"):
        output_dtype(e, S)


def test_when_with_otherwise_needs_every_condition_to_be_a_bool():
    # mutant: _Checker.visit_when taking the conditions as ``args[0:+1:2]`` (only the first)
    e = when(col("b")).then(1).when(col("i")).then(2).otherwise(3)
    with pytest.raises(ExpressionError, match=r"needs a condition \(a bool\)"):
        output_dtype(e, S)


def test_when_result_is_nullable_if_a_later_branch_value_is():
    # mutant: args[1:-1:3] again: the nullable second value was left out of the result's
    # nullability (int64, where the branch can give a null)
    e = when(col("c")).then(col("j")).when(col("c")).then(col("i")).otherwise(0)
    assert str(output_dtype(e, S)) == "int64?"


def test_a_null_literal_is_a_condition():
    # mutant: _Checker.visit_when accepting only "bool" (and a misspelt "null") conditions:
    # an untyped null condition, which is false, was rejected
    assert str(output_dtype(when(lit(None)).then(1).otherwise(2).alias("w"), S)) == "int64"
