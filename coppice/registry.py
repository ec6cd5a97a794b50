"""Registered models: a name with numbered versions (each one model) and movable aliases.

The objects mirror ``/v1/registered-models`` (docs/registry.md); every one keeps the server's
JSON in ``.info``. The calls that change the registry are on :class:`~coppice.Client`
(``register``, ``set_alias``, ...), with shortcuts on the objects that forward to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coppice._resource import Resource, api_path
from coppice.models import Model

if TYPE_CHECKING:
    from coppice.pagination import Page

COLLECTION = "registered-models"


class _NamesVersion:
    """What names one version of a registered model: a version, or an alias."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    @property
    def name(self) -> str:
        return str(self.info["name"])

    @property
    def version(self) -> int:
        return int(self.info["version"])

    @property
    def model_id(self) -> str:
        return str(self.info["model_id"])


class ModelVersion(Resource, _NamesVersion):
    """Version ``version`` of the registered model ``name``: one model, and the aliases that
    name it."""

    collection = COLLECTION

    @classmethod
    def path_for(cls, *segments: str | int) -> str:
        """``path_for(name)``: the versions of ``name``; ``path_for(name, 3)``: version 3."""
        name, *version = segments
        return api_path(cls.collection, name, "versions", *version)

    @property
    def path(self) -> str:
        return self.path_for(self.name, self.version)

    def __repr__(self) -> str:
        aliases = f" ({', '.join(self.aliases)})" if self.aliases else ""
        return f"<ModelVersion {self.name}@{self.version}{aliases} model={self.model_id}>"

    @property
    def aliases(self) -> list[str]:
        return list(self.info.get("aliases") or [])

    @property
    def created_by(self) -> str | None:
        """The label of the API key that registered it; ``None`` when the server has no keys."""
        return self.info.get("created_by")

    @property
    def created_at(self) -> str:
        return str(self.info["created_at"])

    @property
    def ref(self) -> str:
        """``name@N``: the reference that always means this version."""
        return f"{self.name}@{self.version}"

    def model(self, *, ref: str | None = None) -> Model:
        """The version's model (it knows it is this version: ``model.registered_version``);
        ``ref`` is the reference it was asked by (``churn@production``; default ``name@N``)."""
        info = self._get(Model.path_for(self.model_id))
        return Model(self._client, info, ref=ref or self.ref, registered_version=self)

    def delete(self) -> None:
        """Remove the version from its name (the model stays; a ``409`` while an alias names
        it). Its number is never given again."""
        self._delete(self.path)


class RegisteredModel(Resource):
    """A registered model as last seen. A listing's items carry its aliases and newest version
    only; :attr:`versions` fetches the rest on first use."""

    collection = COLLECTION

    @property
    def key(self) -> str:
        return self.name

    def __repr__(self) -> str:
        aliases = ", ".join(f"{a}=v{v}" for a, v in self.aliases.items())
        return f"<RegisteredModel {self.name!r} latest=v{self.latest_version} {aliases}>".strip()

    @property
    def name(self) -> str:
        return str(self.info["name"])

    @property
    def description(self) -> str:
        return str(self.info.get("description") or "")

    @property
    def aliases(self) -> dict[str, int]:
        """Alias → version, e.g. ``{"production": 3, "candidate": 4}``."""
        return {str(alias): int(v) for alias, v in (self.info.get("aliases") or {}).items()}

    @property
    def latest_version(self) -> int | None:
        """The newest version that exists; ``None`` while there is none."""
        latest = self.info.get("latest_version")
        return None if latest is None else int(latest)

    @property
    def created_at(self) -> str:
        return str(self.info["created_at"])

    @property
    def versions(self) -> list[ModelVersion]:
        """Every version, oldest first, with the aliases that name it."""
        if "versions" not in self.info:
            self.refresh()
        return [ModelVersion(self._client, v) for v in self.info["versions"]]

    def version(self, selector: int | str) -> ModelVersion | None:
        """The version a reference's part after ``@`` means here (``3``, ``"3"``,
        ``"production"``, ``"latest"``), as last seen; ``None`` when there is none."""
        text = str(selector)
        if text == "latest":
            number = self.latest_version
        elif text.isdigit():
            number = int(text)
        else:
            number = self.aliases.get(text)
        return next((v for v in self.versions if v.version == number), None)

    def refresh(self) -> RegisteredModel:
        """Read it again (its versions included)."""
        self.info = self._get(self.path)
        return self

    def register(self, model: Model | str, *, alias: str | None = None) -> ModelVersion:
        """Add ``model`` as the next version (see :meth:`Client.register`)."""
        return self._client.register(model, self.name, alias=alias)

    def set_alias(self, alias: str, version: int) -> Alias:
        """Point ``alias`` at ``version`` (see :meth:`Client.set_alias`)."""
        return self._client.set_alias(self.name, alias, version)

    def alias_history(self, *, limit: int = 50, offset: int = 0) -> Page[AliasMove]:
        """Every alias move, newest first (see :meth:`Client.alias_history`)."""
        return self._client.alias_history(self.name, limit=limit, offset=offset)

    def delete(self) -> None:
        """Delete the name, its versions, aliases and history; the models stay."""
        self._delete(self.path)


class Alias(_NamesVersion):
    """Where an alias points, as ``PUT``/``GET .../aliases/{alias}`` answer."""

    @staticmethod
    def path_for(name: str, alias: str) -> str:
        return api_path(COLLECTION, name, "aliases", alias)

    def __repr__(self) -> str:
        return f"<Alias {self.name}@{self.alias} -> v{self.version} model={self.model_id}>"

    @property
    def alias(self) -> str:
        return str(self.info["alias"])

    @property
    def previous_version(self) -> int | None:
        """After a move: the version the alias named before (``None``: it was new)."""
        previous = self.info.get("previous_version")
        return None if previous is None else int(previous)


class AliasMove:
    """One move of an alias: who moved it, when, from which version to which (``to_version``
    ``None``: the alias was removed). Model ids are kept even when a version is deleted."""

    @staticmethod
    def path_for(name: str) -> str:
        """The history of ``name``'s aliases."""
        return api_path(COLLECTION, name, "history")

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def __repr__(self) -> str:
        def shown(version: int | None) -> str:
            return "-" if version is None else f"v{version}"

        return (
            f"<AliasMove {self.alias}: {shown(self.from_version)} -> {shown(self.to_version)} "
            f"at {self.moved_at} by {self.actor}>"
        )

    @property
    def alias(self) -> str:
        return str(self.info["alias"])

    @property
    def from_version(self) -> int | None:
        return self.info.get("from_version")

    @property
    def to_version(self) -> int | None:
        return self.info.get("to_version")

    @property
    def from_model_id(self) -> str | None:
        return self.info.get("from_model_id")

    @property
    def to_model_id(self) -> str | None:
        return self.info.get("to_model_id")

    @property
    def actor(self) -> str | None:
        """The label of the API key that moved it; ``None`` when the server has no keys."""
        return self.info.get("actor")

    @property
    def moved_at(self) -> str:
        return str(self.info["moved_at"])
