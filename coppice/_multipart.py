"""A ``multipart/form-data`` body written as it is sent, for uploads of any size.

httpx's own multipart encoder wants the file as bytes or an open file; a table held in a
DataFrame or an array would first have to be written out whole. Here the file part is any
iterator of byte chunks, so a CSV is produced a slice of rows at a time while it is sent.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StreamingForm:
    """A form's ``Content-Type``, its length when known, and its body as chunks."""

    content_type: str
    content_length: int | None
    chunks: Iterator[bytes]

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": self.content_type}
        if self.content_length is not None:
            # Known up front (a file on disk): the server can refuse an oversized upload at
            # once, and no chunked transfer encoding is needed.
            headers["Content-Length"] = str(self.content_length)
        return headers


def _quote(value: str) -> str:
    # The HTML standard's escaping of names in Content-Disposition: quotes and line breaks
    # would otherwise end the header early.
    return value.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def streaming_form(
    fields: Mapping[str, str],
    file_field: str,
    filename: str,
    file_chunks: Iterable[bytes],
    file_size: int | None = None,
) -> StreamingForm:
    """The form ``fields`` plus one file part whose bytes come from ``file_chunks``.

    ``file_size``, when given, must be the total length of the chunks; the body's
    ``Content-Length`` is then sent.
    """
    boundary = secrets.token_hex(16)
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'.encode()
        + value.encode()
        + b"\r\n"
        for name, value in fields.items()
    )
    head += (
        f"--{boundary}\r\nContent-Disposition: form-data; "
        f'name="{_quote(file_field)}"; filename="{_quote(filename)}"\r\n'
        "Content-Type: text/csv\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Iterator[bytes]:
        yield head
        yield from file_chunks
        yield tail

    length = None if file_size is None else len(head) + file_size + len(tail)
    return StreamingForm(f"multipart/form-data; boundary={boundary}", length, body())
