"""Read a ``multipart/form-data`` upload as a stream, with a limit on the file's size.

Starlette's ``request.form()`` would spool the whole file before the handler sees a byte;
``FormStream`` instead feeds the body, chunk by chunk as the client sends it, through
python-multipart's push parser and hands on the ``file`` part's bytes at once. Exceeding
``max_file_bytes`` raises 413 at the chunk that passes it, without reading the rest.

The parser runs in a worker thread (it drives the CSV parser, which is synchronous);
``receive`` is how that thread asks the event loop for the next chunk of the body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

from service.errors import BadRequest, PayloadTooLarge

FILE_FIELD = "file"
# Every other form field together (name, categorical) may hold this much.
MAX_FIELD_BYTES = 1024 * 1024


def multipart_boundary(content_type: str) -> bytes:
    """The boundary of a ``multipart/form-data`` Content-Type header; 400 when it has none."""
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise BadRequest("The multipart/form-data Content-Type header has no boundary.")
    return boundary


class FormStream:
    """One multipart body: iterate ``file_chunks()``, then read ``fields``."""

    def __init__(
        self, receive: Callable[[], bytes | None], boundary: bytes, *, max_file_bytes: int
    ) -> None:
        self._receive = receive
        self._max_file_bytes = max_file_bytes
        self.fields: dict[str, str] = {}
        self.filename: str | None = None
        self.file_content_type: str | None = None
        self._file_bytes = 0
        self._field_bytes = 0
        self._seen_file = False
        self._pending: list[bytes] = []
        # The part being read: its headers, then its name and whether it is the file.
        self._header_name = b""
        self._headers: dict[bytes, bytes] = {}
        self._part: str | None = None
        self._part_is_file = False
        self._value = bytearray()
        self._parser = MultipartParser(
            boundary,
            callbacks={
                "on_part_begin": self._on_part_begin,
                "on_header_field": self._on_header_field,
                "on_header_value": self._on_header_value,
                "on_header_end": self._on_header_end,
                "on_headers_finished": self._on_headers_finished,
                "on_part_data": self._on_part_data,
                "on_part_end": self._on_part_end,
            },
        )

    def file_chunks(self) -> Iterator[bytes]:
        """The ``file`` part's bytes as they arrive; reads the body to its end."""
        while True:
            while self._pending:
                yield self._pending.pop(0)
            chunk = self._receive()
            if chunk is None:
                break
            try:
                self._parser.write(chunk)
            except MultipartParseError as error:
                raise BadRequest(f"The multipart/form-data body is malformed: {error}.") from None
        try:
            self._parser.finalize()
        except MultipartParseError as error:
            raise BadRequest(f"The multipart/form-data body is malformed: {error}.") from None
        yield from self._pending
        self._pending.clear()
        if not self._seen_file:
            raise BadRequest(
                f"The form has no '{FILE_FIELD}' part; send the CSV file as the form field "
                f"'{FILE_FIELD}'."
            )

    # python-multipart callbacks: each gets a slice of the chunk being parsed.

    def _on_part_begin(self) -> None:
        self._headers = {}
        self._header_name = b""

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        name = self._header_name.lower()
        self._headers[name] = self._headers.get(name, b"") + data[start:end]

    def _on_header_end(self) -> None:
        self._header_name = b""

    def _on_headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        self._part = options.get(b"name", b"").decode("utf-8", errors="replace")
        self._part_is_file = self._part == FILE_FIELD
        if self._part_is_file:
            if self._seen_file:
                raise BadRequest(f"The form has more than one '{FILE_FIELD}' part.")
            self._seen_file = True
            filename = options.get(b"filename")
            self.filename = filename.decode("utf-8", errors="replace") if filename else None
            content_type = self._headers.get(b"content-type")
            self.file_content_type = content_type.decode("latin-1") if content_type else None
        self._value = bytearray()

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        size = end - start
        if self._part_is_file:
            self._file_bytes += size
            if self._file_bytes > self._max_file_bytes:
                raise PayloadTooLarge(
                    f"The file is larger than this server accepts: at most "
                    f"{self._max_file_bytes} bytes (COPPICE_MAX_UPLOAD_BYTES)."
                )
            self._pending.append(bytes(data[start:end]))
            return
        self._field_bytes += size
        if self._field_bytes > MAX_FIELD_BYTES:
            raise PayloadTooLarge(
                f"The form fields other than '{FILE_FIELD}' hold more than {MAX_FIELD_BYTES} bytes."
            )
        self._value += data[start:end]

    def _on_part_end(self) -> None:
        if self._part is not None and not self._part_is_file:
            try:
                self.fields[self._part] = self._value.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest(f"The form field '{self._part}' is not UTF-8 text.") from None
