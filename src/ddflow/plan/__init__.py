"""The plan: a dataflow as frozen nodes (:mod:`~ddflow.plan.nodes`), the rewrite passes over it
(:mod:`~ddflow.plan.fusion`) and its build into timely operators on a runtime
(:mod:`~ddflow.plan.build`)."""
