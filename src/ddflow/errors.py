"""The errors ddflow raises, and the call sites they point at.

Every error a user can cause is a :class:`DDFlowError`; its message names the mistake and, where
the mistake was made while building a dataflow, the line of the user's code that made it
(captured by :func:`call_site` when the collection, expression or operator was created).

>>> try:
...     raise SchemaError("column 'x' is missing", site=CallSite("job.py", 12, "build"))
... except DDFlowError as e:
...     print(e)
column 'x' is missing (at job.py:12 in build)
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

__all__ = [
    "CBPError",
    "CallSite",
    "ClosedInputError",
    "ConfigurationError",
    "DDFlowError",
    "DataflowFailedError",
    "ExpressionError",
    "GraphError",
    "InputError",
    "SchemaError",
    "TimeError",
    "TimelyError",
    "UserFunctionError",
    "WorkerError",
    "call_site",
    "function_text",
]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class CallSite:
    """Where in the user's code something was created."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"


#: whether a code object's file is in the package, by file name as the code gives it (every
#: insert, remove and advance asks for its call site: a path made absolute once per file; a
#: relative name is resolved against the working directory of its first use)
_IN_PACKAGE: dict[str, bool] = {}


def _in_package(filename: str) -> bool:
    inside = _IN_PACKAGE.get(filename)
    if inside is None:
        inside = os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)
        if len(_IN_PACKAGE) < 4096:  # (generated code can have many names)
            _IN_PACKAGE[filename] = inside
    return inside


def call_site() -> CallSite | None:
    """The innermost stack frame outside the ddflow package: the user's line."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _in_package(frame.f_code.co_filename):
            return CallSite(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back  # type: ignore[assignment]
    return None


def function_text(kind: str, fn: object) -> str:
    """How an error names a user's function: its kind, name and where it is defined.

    >>> def double(r):
    ...     return r
    >>> function_text("map", double).startswith("the map function double (defined at ")
    True
    """
    code = getattr(fn, "__code__", None)
    if code is None:  # (a callable object: its __call__)
        code = getattr(type(fn).__dict__.get("__call__"), "__code__", None)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    where = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return f"the {kind} function {name}{where}"


class DDFlowError(Exception):
    """Base class of every error ddflow raises for a user's mistake."""

    def __init__(self, message: str, *, site: CallSite | None = None) -> None:
        self.message = message
        self.site = site
        super().__init__(f"{message} (at {site})" if site is not None else message)


class SchemaError(DDFlowError, TypeError):
    """Data or a schema that does not fit: unknown or missing columns, wrong types, nulls."""


class ExpressionError(DDFlowError, TypeError):
    """A column expression that cannot be compiled against its input's schema."""


class ConfigurationError(DDFlowError, ValueError):
    """A setting a constructor cannot take: ``Dataflow(workers=0)``, a ``checkpoint_every``
    without a ``checkpoint`` directory, more Spark workers than the session has task slots."""


class InputError(DDFlowError, ValueError):
    """Misuse of an input handle."""


class ClosedInputError(InputError):
    """Data or progress sent to an input that was closed."""


class TimeError(DDFlowError, ValueError):
    """Times that go backwards: advancing to an earlier epoch, sending before a capability."""


class GraphError(DDFlowError, ValueError):
    """A dataflow that cannot be built: mixing flows or scopes, changing a running graph."""


class TimelyError(DDFlowError, RuntimeError):
    """Misuse of the timely vertex API: sending or notifying at a time earlier than allowed."""


class UserFunctionError(DDFlowError, RuntimeError):
    """A user function (a ``map``, ``flat_map``, ``reduce``, ``threshold`` or ``inspect``
    function, a vertex's handler) raised inside ``run()``. The original exception is its
    ``__cause__``; ``site`` is the line that gave the function to ddflow. The dataflow has
    stopped (see :class:`DataflowFailedError`)."""


class WorkerError(DDFlowError, RuntimeError):
    """A worker process of a ``Dataflow(workers=...)`` died or could not start; the message
    names the worker, its process id and how it ended (exit code, signal, its traceback). The
    dataflow has stopped (see :class:`DataflowFailedError`)."""


class CheckpointError(DDFlowError, RuntimeError):
    """A checkpoint cannot be written or restored (the dataflow is not at a complete epoch, a
    vertex keeps state it cannot save, the checkpoint is of another plan...)."""


class CBPError(DDFlowError, ValueError):
    """A CBP stage's function gave what its stage cannot take: translate writing a record that
    does not fit its flow, or to a flow the stage does not have; Runnable naming an increment
    that does not exist; a RouteBy or FrameBy giving a key of the wrong kind. The message names
    the stage, the flow, the record and the user's line. Raised inside ``run()``, it stops the
    dataflow like a failing user function (see :class:`DataflowFailedError`)."""


class DataflowFailedError(DDFlowError, RuntimeError):
    """A call on a dataflow that stopped when an operator failed inside ``run()``.

    An operator that fails may have taken some of an epoch's updates and not others, so the
    dataflow cannot go on without risking silently wrong results: it refuses every later call
    that would feed or run it, naming the original failure. Outputs still read the epochs that
    were complete before the failure."""
