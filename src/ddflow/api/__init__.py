"""The user-facing API: :class:`~ddflow.api.collection.Collection`,
:class:`~ddflow.api.dataflow.Dataflow`, its inputs, outputs and probes; re-exported by
:mod:`ddflow`."""
