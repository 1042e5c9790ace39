"""Several workers for one dataflow: ``Dataflow(workers=W)``.

Every keyed arrangement is split by its key over W workers, worker ``owner(key)`` owning it
(:func:`~ddflow.runtime.local.rows.owner`), and an exchange before each keyed operator sends
each update to its key's owner (:mod:`ddflow.timely.cluster`, :mod:`ddflow.plan.build`).
Worker 0 is the process that owns the dataflow, which also coordinates; the others are
processes of their own (:mod:`ddflow.runtime.workers.processes`), each with a copy of the
operators built from the plan it was sent (:mod:`ddflow.runtime.workers.shipping`), and
batches travel between them as Arrow data (:mod:`ddflow.runtime.workers.wire`). Results do
not depend on W.
"""

from ddflow.runtime.workers.processes import WorkerProcesses, reuse_processes, start_workers

__all__ = ["WorkerProcesses", "reuse_processes", "start_workers"]
