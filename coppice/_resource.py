"""What every object the client returns shares: its server's request methods, bound once,
and its own address under ``/v1``, escaped in one place.

The shape is openai-python's (``_resource.py``: a ``SyncAPIResource`` binds the client's
``get``/``post``/``delete`` at construction), so an object never reaches into the client's
transport, and adding a verb to an object is one method calling ``self._get(self.path...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

if TYPE_CHECKING:
    from coppice.client import Client


def api_path(*segments: str | int) -> str:
    """``/v1/`` and the segments, each escaped as one path segment: an id, a registered
    name or alias with a ``/``, ``?`` or ``#`` in it cannot change which resource is asked
    for. ``@`` stays as it is, so ``name@alias`` references read as typed (RFC 3986 allows
    ``@`` in a segment)."""
    return "/v1/" + "/".join(quote(str(segment), safe="@") for segment in segments)


class Resource:
    """A resource on one server, as last seen: the server's JSON in :attr:`info`, and the
    client's request methods bound as ``_get``, ``_post``, ``_put`` and ``_delete`` (and
    ``_get_bytes``, for an answer that is a file; ``_stream``, a GET read as it arrives)."""

    #: Its collection under /v1 ("datasets", "jobs", ...).
    collection: ClassVar[str]

    def __init__(self, client: Client, info: dict[str, Any]) -> None:
        self._client = client
        self.info = info
        self._get = client._get
        self._post = client._post
        self._put = client._put
        self._delete = client._delete
        self._get_bytes = client._get_bytes
        self._stream = client._stream

    @classmethod
    def path_for(cls, *segments: str | int) -> str:
        """The collection's address, or (``path_for(key, ...)``) the one with ``key`` (an
        id, a name) and what is under it."""
        return api_path(cls.collection, *segments)

    @property
    def key(self) -> str:
        """What names it in its collection: its id (registered models: their name)."""
        return str(self.info["id"])

    @property
    def path(self) -> str:
        """Its own address, ``/v1/<collection>/<key>``."""
        return self.path_for(self.key)
