"""Column expressions: the tree users build (:mod:`~ddflow.expr.nodes`) and its typing and
compilation into a runtime's native expressions, once, when a dataflow is built
(:mod:`~ddflow.expr.compiler`)."""
