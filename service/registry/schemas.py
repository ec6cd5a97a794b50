"""Request and response bodies of ``/v1/registered-models``."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from service.registry.references import NAME_PATTERN

# Versions are stored as 32-bit integers on every backend.
MAX_VERSION = 2**31 - 1


class RegisteredModelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=NAME_PATTERN,
        description="Letters, digits, '_', '.' and '-'; starts with a letter or digit; at most 128.",
    )
    description: str = Field(default="", max_length=10_000)


class VersionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str = Field(min_length=1, max_length=36, description="The model to register.")
    alias: str | None = Field(
        default=None, max_length=64, description="An alias to point at the new version."
    )


class AliasSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=MAX_VERSION, description="The version the alias will name.")


class VersionOut(BaseModel):
    name: str
    version: int
    model_id: str
    aliases: list[str] = Field(description="The aliases that name this version.")
    created_by: str | None = Field(description="The API key that registered it; null: no keys.")
    created_at: datetime


class RegisteredModelOut(BaseModel):
    name: str
    description: str
    versions: list[VersionOut] = Field(description="Oldest first.")
    aliases: dict[str, int] = Field(description="Alias → version.")
    latest_version: int | None = Field(description="The newest version that exists.")
    created_at: datetime


class RegisteredModelSummaryOut(BaseModel):
    """A registered model in a listing: its aliases and newest version, not every version."""

    name: str
    description: str
    n_versions: int
    latest_version: int | None
    aliases: dict[str, int]
    created_at: datetime


class RegisteredModelPage(BaseModel):
    items: list[RegisteredModelSummaryOut]
    total: int


class AliasOut(BaseModel):
    name: str
    alias: str
    version: int
    model_id: str
    previous_version: int | None = Field(
        default=None, description="The version it named before this move; null: it was new."
    )


class AliasMoveOut(BaseModel):
    """One move of an alias; ``to_version`` null means it was removed."""

    alias: str
    from_version: int | None
    to_version: int | None
    from_model_id: str | None
    to_model_id: str | None
    actor: str | None = Field(description="The API key's label; null when keys are off.")
    moved_at: datetime


class AliasMovePage(BaseModel):
    items: list[AliasMoveOut] = Field(description="Newest first.")
    total: int
