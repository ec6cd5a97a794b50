"""Growing one tree: from binned rows to a :class:`~engine.tree._tree.Tree`.

* :mod:`~engine.tree.grow.build` — a tree from the shared binned data and one tree's weights;
* :mod:`~engine.tree.grow.grower` — the order of growth: level by level, or best-first;
* :mod:`~engine.tree.grow.random_levels` — level-wise growth of extremely randomised trees,
  each node's rows carried with their channels;
* :mod:`~engine.tree.grow.whole_tree` — a boosted second-order tree grown in one compiled
  call, the level loop of :mod:`~engine.tree.grow.grower` being its twin;
* :mod:`~engine.tree.grow.growth` — the state of one growing tree and the work of a step,
  composed of :mod:`~engine.tree.grow.features` (which features a node searches) and
  :mod:`~engine.tree.grow.records` (the nodes and splits recorded);
* :mod:`~engine.tree.grow.limits` — the stopping rules (:class:`GrowthLimits`);
* :mod:`~engine.tree.grow.level_kernels`, :mod:`~engine.tree.grow.partition_kernels` — node
  totals and moving a level's rows to their children, each kernel beside its NumPy twin.

Kept import-free, so that importing one module does not import the whole stage.
"""
