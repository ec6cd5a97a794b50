"""The classes a saved model may name: loading instantiates these and no others."""

from __future__ import annotations

from typing import TypeVar

C = TypeVar("C", bound=type)


_REGISTRY: dict[str, type] = {}


def qualified_name(cls: type) -> str:
    """The name a class is saved under, e.g. ``"engine.tree.DecisionTreeClassifier"``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def register_model_class(cls: C) -> C:
    """Allow instances of ``cls`` to be saved and loaded; usable as a class decorator.

    Register every estimator and every helper class an estimator keeps as an attribute (a bin
    mapper, a tree). Attributes named in the class attribute ``_persistence_exclude`` (a tuple
    of names) are not saved; the class must rebuild them on demand.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_model_class expects a class; got {cls!r}.")
    name = qualified_name(cls)
    if "<" in name:
        raise ValueError(f"{name} is local to a function; only module-level classes can load.")
    _REGISTRY[name] = cls
    return cls


def registered_class(name: str) -> type:
    """The class registered under ``name``; :class:`KeyError` if there is none."""
    return _REGISTRY[name]
