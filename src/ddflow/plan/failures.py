"""Which user function failed: a failure inside an operator step, told apart from a failure of
ddflow itself and named by the user's function and the line that gave it."""

from __future__ import annotations

import os
import sysconfig
from typing import Any

from ddflow.errors import DDFlowError, UserFunctionError
from ddflow.plan.nodes import Node, Plan

__all__ = ["user_function_error"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_function_error(plan: Plan, error: BaseException) -> UserFunctionError | None:
    """A :class:`UserFunctionError` for an exception that a user function raised inside an
    operator step, or None if the exception did not come from user code (an interrupt, a
    failure of ddflow itself).

    The function is the first frame of the traceback outside the ddflow package (the
    function ddflow called); the plan node whose function it is names the operator and the
    line that gave it."""
    if not isinstance(error, Exception) or isinstance(error, DDFlowError):
        return None
    tb = error.__traceback__
    frame = None
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            frame = tb.tb_frame
            break
        tb = tb.tb_next
    if frame is None:
        return None
    code = frame.f_code
    node = next((n for n in plan.nodes if _runs_in(n, frame)), None)
    if node is None and _in_library(frame):
        return None  # a library ddflow calls (Polars, NumPy) failed: a failure of ddflow
    what = f"the function {code.co_name}"
    if node is not None:
        if node.op == "vertex":
            what = f"the vertex {type(node.params['vertex']).__name__}.{code.co_name}"
        elif node.op == "stage":
            what = f"the CBP stage {node.params['spec'].name!r}'s function {code.co_name}"
        else:
            what = f"the {_kind(node)} function {code.co_name}"
    where = f"{code.co_filename}:{code.co_firstlineno}"
    return UserFunctionError(
        f"{what} (defined at {where}) raised {type(error).__name__}: {error}",
        site=node.site if node is not None else None,
    )


_LIBRARY_DIRS = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _in_library(frame: Any) -> bool:
    """Whether ``frame`` runs code of an installed library or of the standard library."""
    filename = os.path.abspath(frame.f_code.co_filename)
    return filename.startswith(_LIBRARY_DIRS) or "site-packages" in filename


def _runs_in(node: Node, frame: Any) -> bool:
    """Whether ``frame`` runs the user code of ``node``: its function, or a method of its
    vertex."""
    if node.op == "vertex":
        return frame.f_locals.get("self") is node.params["vertex"]
    if node.op == "stage":
        fns = node.params["spec"].functions()
        return any(getattr(f, "__code__", None) is frame.f_code for f in fns)
    fn = node.params.get("fn")
    fn = getattr(fn, "__wrapped__", fn)  # (the user's function, under ddflow's wrapper)
    return fn is not None and getattr(fn, "__code__", None) is frame.f_code


def _kind(node: Node) -> str:
    kind = node.params.get("kind") if node.op == "reduce" else None
    return {"reduce": "group_by().reduce", None: node.op}.get(kind, str(kind))
