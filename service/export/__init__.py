"""Models that leave Coppice: ONNX graphs (and Triton repositories) with the same answers.

One module per model family builds its graph with ``onnx.helper`` from the estimator's public
fitted attributes and the engine's public tree arrays; the engine itself knows nothing of ONNX.
``families.to_onnx`` is the entry point, ``router`` the HTTP endpoint (docs/export.md).
"""
