"""The Open Inference Protocol (KServe v2) surface under ``/v2``."""
