"""API keys: their roles, the forms ``COPPICE_API_KEYS`` accepts, and constant-time lookup.

Only SHA-256 digests of keys are kept once the settings are read, so a plaintext key lives
nowhere but the environment — and need not live even there: configure its digest instead.
Nothing here imports the web stack, so ``service.config`` can use it cheaply.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
# Printable ASCII without spaces: what an HTTP Authorization header carries unchanged.
_KEY_CHARACTERS = re.compile(r"[!-~]+")


class Role(StrEnum):
    ADMIN = "admin"
    PREDICT = "predict"


class ApiKey(BaseModel):
    """One configured key: its SHA-256 digest (never the key itself), its role, a name for logs.

    Built from ``{"key": "...", "role": "..."}`` (the key is hashed at once) or
    ``{"sha256": "<64 hex digits>", "role": "..."}``; ``name`` is optional.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    role: Role
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "key" in data:
            key = data.pop("key")
            if "sha256" in data:
                raise ValueError("give an API key either as 'key' or as 'sha256', not both")
            if not isinstance(key, str) or not _KEY_CHARACTERS.fullmatch(key):
                raise ValueError(
                    "an API key must be non-empty printable ASCII without spaces "
                    "(e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
                )
            data["sha256"] = digest_of(key)
        elif isinstance(data.get("sha256"), str):
            data["sha256"] = data["sha256"].strip().lower()
        return data

    @property
    def label(self) -> str:
        """What logs call this key: its name, or the first hex digits of its digest."""
        return self.name or f"sha256:{self.sha256[:8]}"


def digest_of(key: str) -> str:
    """The hex SHA-256 of a key, as ``COPPICE_API_KEYS`` accepts it (``sha256sum`` gives it too)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _compact_entry(entry: str) -> dict[str, str]:
    """``key:role`` or ``sha256:<hex>:role``; the role is whatever follows the last colon."""
    key, colon, role = entry.rpartition(":")
    if not colon or not key:
        raise ValueError(
            "each comma-separated entry of COPPICE_API_KEYS must be 'key:role' or "
            "'sha256:<hex digest>:role'"
        )
    prefix, _, digest = key.partition(":")
    if prefix == "sha256" and _HEX_DIGEST.fullmatch(digest):
        return {"sha256": digest, "role": role}
    return {"key": key, "role": role}


def parse_api_keys(value: Any) -> list[Any]:
    """What ``COPPICE_API_KEYS`` may be, turned into a list for ``list[ApiKey]`` to validate.

    - comma-separated entries: ``key1:admin,key2:predict,sha256:<64 hex>:predict``;
    - a JSON list of objects: ``[{"key": "...", "role": "admin", "name": "ci"},
      {"sha256": "...", "role": "predict"}]``;
    - unset or empty: no keys, the API is open.

    Error messages never repeat a key.
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                # The decoder's message quotes the text around the error: perhaps a key.
                raise ValueError("COPPICE_API_KEYS starts with '[' but is not valid JSON") from None
        else:
            return [_compact_entry(entry.strip()) for entry in text.split(",") if entry.strip()]
    if not isinstance(value, list | tuple):
        raise ValueError("COPPICE_API_KEYS must be a list of keys")
    return [_compact_entry(item.strip()) if isinstance(item, str) else item for item in value]


def check_unique(keys: Sequence[ApiKey]) -> None:
    seen: set[str] = set()
    for key in keys:
        if key.sha256 in seen:
            raise ValueError("COPPICE_API_KEYS lists the same key twice")
        seen.add(key.sha256)


class KeyRing:
    """The configured keys, and the one way to look a presented key up among them."""

    def __init__(self, keys: Sequence[ApiKey]) -> None:
        self._keys = [(bytes.fromhex(key.sha256), key) for key in keys]

    def __len__(self) -> int:
        return len(self._keys)

    def authenticate(self, presented: str) -> ApiKey | None:
        """The key ``presented`` is, or ``None``; in time independent of which key matched.

        The presented key is hashed first, so every comparison is between two 32-byte digests,
        and it is compared with every configured key, with no early exit.
        """
        digest = hashlib.sha256(presented.encode("utf-8")).digest()
        found: ApiKey | None = None
        for candidate, key in self._keys:
            if hmac.compare_digest(digest, candidate) and found is None:
                found = key
        return found
