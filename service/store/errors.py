"""What can go wrong with the data store, as errors the problem renderer already knows.

Each is a ``ServiceError``, so a request that meets one gets problem+json with a sentence
naming the object, and the worker can tell "try again later" (``StoreUnavailable``) from
"these bytes are damaged" (``ObjectCorrupt``) without parsing messages.
"""

from __future__ import annotations

from http import HTTPStatus

from service.errors import NotReady, ServiceError


class StoreUnavailable(NotReady):
    """The data store cannot be reached right now; try again shortly."""


class ObjectCorrupt(ServiceError):
    """A stored object's bytes do not match the size and SHA-256 recorded for it."""

    # 409, as for a corrupt model artifact: the request is fine, the resource is damaged.
    status = HTTPStatus.CONFLICT
    type = "urn:coppice:problem:object-corrupt"

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(detail)

    @property
    def title(self) -> str:
        return "Stored object corrupt"


class ObjectMissing(ObjectCorrupt):
    """An object a row names is not in the store (deleted by hand, or a store restored alone)."""
