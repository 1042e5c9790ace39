"""Testing helpers shared by users and ddflow's own tests.

* :func:`reference` evaluates a dataflow's plan from scratch on the accumulated inputs of one
  epoch (:mod:`ddflow.testing.reference`);
* :mod:`ddflow.testing.values` holds its plain-Python evaluation of column expressions and
  its conversion of Python values to column types, written from the documented semantics and
  sharing no code with the engine;
* :mod:`ddflow.testing.strategies` holds Hypothesis strategies of update streams and random
  dataflows, for testing pipelines against the reference.
"""

from ddflow.testing.reference import ReferenceError, accumulate, frame_to_counter, reference

__all__ = ["ReferenceError", "accumulate", "frame_to_counter", "reference"]
