"""Predicting with grown trees: descending them, summing their leaves, packing many into one.

* :mod:`~engine.tree.predict.node_arrays` — the flat node layout the kernels read;
* :mod:`~engine.tree.predict.traversal` — each row's leaf (compiled, and its NumPy twin);
* :mod:`~engine.tree.predict.leaf_sums` — the sum of many trees' leaf values per row;
* :mod:`~engine.tree.predict.packing` — many trees in one set of arrays for one call.

Kept import-free: :class:`engine.tree._tree.Tree` (a persisted class, so it keeps its module)
reads the traversal, and packing reads ``Tree``.
"""
