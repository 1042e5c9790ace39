"""The differential operators, written once against the runtime's kernels.

* :mod:`~ddflow.operators.linear`: stateless operators (expressions, row functions, concat,
  negate, loop ingress/feedback/egress), applied message by message;
* :mod:`~ddflow.operators.io`: inputs, outputs and probes at the edge of the dataflow;
* :mod:`~ddflow.operators.join`: arrangements and the join that reads them;
* :mod:`~ddflow.operators.reduce`: the reduce family (group-by aggregates, distinct, threshold,
  arbitrary group functions) over partially ordered times;
* :mod:`~ddflow.operators.vertex`: the runner of user-written timely vertices.
"""
