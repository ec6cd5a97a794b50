"""The data store: bytes (dataset parts, model artifacts) under one fsspec root, each named by
a SQL row with its size and SHA-256 (see ``service.store.store``)."""

from service.store.errors import ObjectCorrupt, ObjectMissing, StoreUnavailable
from service.store.objects import StoredObject
from service.store.store import DataStore, ObjectInfo, store_from_settings

__all__ = [
    "DataStore",
    "ObjectCorrupt",
    "ObjectInfo",
    "ObjectMissing",
    "StoreUnavailable",
    "StoredObject",
    "store_from_settings",
]
