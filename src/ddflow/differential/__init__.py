"""Differential dataflow on top of timely dataflow (differential-dataflow-cidr2013).

* :mod:`~ddflow.differential.batch`: the batch contract (data columns, time coordinates, diff);
* :mod:`~ddflow.differential.kernel`: the kernel contract every runtime implements, the
  arrangements (traces) it hands out included;
* :mod:`~ddflow.differential.operators`: the operators, written once against the contract.

Nothing here looks at how a runtime holds its batches.
"""
