"""How a batch prediction's scoring ends early: stopped by its worker, or failed for good."""

from __future__ import annotations


class Interrupted(Exception):
    """The worker asked the batch to stop (a cancel, the runtime limit)."""


class BatchFailed(Exception):
    """The batch cannot succeed however often it is tried."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
