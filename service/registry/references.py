"""What a model reference may be, and the rules for the names and aliases inside one.

A reference is a model id, ``name@alias``, ``name@N`` (version N) or ``name@latest``. Names
cannot contain ``@``, so the last ``@`` splits a reference unambiguously. Aliases a reader
could take for a version (digits, ``v3``, ``latest``) are refused, as MLflow refuses them, so
``name@3`` always means version 3.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
ALIAS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
LATEST = "latest"
# What /v2/models/{name} serves when no alias is named; its latest version when unset.
DEFAULT_ALIAS = "production"

_NAME = re.compile(NAME_PATTERN)
_ALIAS = re.compile(ALIAS_PATTERN)
_VERSION_LIKE = re.compile(r"^[vV]\d+$")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a registered name, or ``None`` if it can."""
    if not _NAME.fullmatch(name):
        return (
            "must start with a letter or digit and have only letters, digits, '_', '.' and '-' "
            "(at most 128 characters)"
        )
    if looks_like_model_id(name):
        # /v2 takes a model id or a registered name in one path segment: keep them apart.
        return "must not have the form of a model id (a UUID)"
    return None


def alias_problem(alias: str) -> str | None:
    """Why ``alias`` cannot be an alias, or ``None`` if it can."""
    if not _ALIAS.fullmatch(alias):
        return (
            "must start with a letter or '_' and have only letters, digits, '_' and '-' "
            "(at most 64 characters)"
        )
    if alias.lower() == LATEST or _VERSION_LIKE.fullmatch(alias):
        return "is reserved, since it would read as a version"
    return None


def looks_like_model_id(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class RegistryRef:
    """``name`` at an alias, a version, or (both ``None``) its default: production, else latest."""

    name: str
    alias: str | None = None
    version: int | None = None
    latest: bool = False

    def __str__(self) -> str:
        if self.version is not None:
            return f"{self.name}@{self.version}"
        if self.latest:
            return f"{self.name}@{LATEST}"
        return f"{self.name}@{self.alias}" if self.alias is not None else self.name


def parse(ref: str) -> RegistryRef | None:
    """The registry reference in ``ref``, or ``None`` when ``ref`` has no ``@`` (a model id)."""
    name, at, target = ref.rpartition("@")
    if not at:
        return None
    if target.isdecimal() and target.isascii():
        return RegistryRef(name, version=int(target))
    if target == LATEST:
        return RegistryRef(name, latest=True)
    return RegistryRef(name, alias=target)
