"""The Spark runtime: a dataflow's workers hosted by Spark (imports pyspark; loaded only when
asked for).

* :mod:`~ddflow.runtime.spark.runtime`: ``SparkRuntime``, what a dataflow runs on;
* :mod:`~ddflow.runtime.spark.hosted`: the workers as the tasks of one barrier stage;
* :mod:`~ddflow.runtime.spark.session`: a session on this machine.
"""
