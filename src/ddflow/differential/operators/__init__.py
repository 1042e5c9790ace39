"""The differential operators, written once against the kernel contract.

* :mod:`~.linear`: stateless operators (expressions, row functions, concat, negate, loop
  ingress/feedback/egress), applied message by message;
* :mod:`~.io`: inputs, outputs and probes at the edge of the dataflow;
* :mod:`~.join`: arrangements and the join that reads them;
* :mod:`~.reduce`: the reduce family (group-by aggregates, distinct, threshold, arbitrary group
  functions) over partially ordered times;
* :mod:`~.vertex`: the runner of user-written timely vertices.
"""
