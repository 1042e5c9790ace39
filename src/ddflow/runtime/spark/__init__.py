"""The Spark runtime: batches as Spark DataFrames (imports pyspark; loaded only when asked for).

* :mod:`~ddflow.runtime.spark.runtime`: ``SparkRuntime``, what a dataflow runs on;
* :mod:`~ddflow.runtime.spark.settings`: its tuning knobs and their defaults (no pyspark);
* :mod:`~ddflow.runtime.spark.session`: a session on this machine, and reaching its workers;
* :mod:`~ddflow.runtime.spark.kernels`: the kernel contract on Spark DataFrames;
* :mod:`~ddflow.runtime.spark.reduce`: the reduce family's kernels;
* :mod:`~ddflow.runtime.spark.exprs`: expressions compiled to Spark columns;
* :mod:`~ddflow.runtime.spark.lattice`: the time lattice as Spark columns.
"""
