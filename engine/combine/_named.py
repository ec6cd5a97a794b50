"""Estimators whose ``estimators`` parameter names their members: parameters and names.

As in scikit-learn, ``estimators`` is a list of ``(name, estimator)`` pairs.
``get_params(deep=True)`` exposes each member under its name and its parameters as
``name__param``, and ``set_params`` accepts both (members replaced first, then their
parameters set), so grid searches reach inside the ensemble. The combiners of
:mod:`engine.combine` and :mod:`engine.fusion` share this.
"""

from __future__ import annotations

from typing import Any

from engine.base import BaseEstimator

__all__ = ["NamedMembersEstimator"]


class NamedMembersEstimator(BaseEstimator):
    """Parameter handling and name checks of an estimator with named members.

    ``_parameter_constraints["estimators"]`` (a :class:`~engine._params.NamedEstimators`)
    says what a valid member list is; until it holds, the members are not reachable.
    """

    estimators: Any

    def _members_are_valid(self) -> bool:
        constraints = self._parameter_constraints.get("estimators", [])
        return any(c.is_satisfied_by(self.estimators) for c in constraints)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep=deep)
        if deep and self._members_are_valid():
            own = set(self._get_param_names())
            for name, estimator in self.estimators:
                if name in own:
                    continue  # refused by fit; never let a member hide a parameter
                params[name] = estimator
                if hasattr(estimator, "get_params"):  # not "drop"
                    for key, value in estimator.get_params(deep=True).items():
                        params[f"{name}__{key}"] = value
        return params

    def set_params(self, **params: Any) -> NamedMembersEstimator:
        if "estimators" in params:
            self.estimators = params.pop("estimators")
        names: set[str] = set()
        if self._members_are_valid():
            names = {name for name, _ in self.estimators} - set(self._get_param_names())
        own: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub_key = key.partition("__")
            if name not in names:
                own[key] = value
            elif sub_key:
                nested.setdefault(name, {})[sub_key] = value
            else:
                self.estimators = [(n, value if n == name else e) for n, e in self.estimators]
        for name, sub_params in nested.items():
            dict(self.estimators)[name].set_params(**sub_params)
        super().set_params(**own)
        return self

    def _check_member_names(self, names: list[str]) -> None:
        """Refuse repeated names, and names ``get_params`` could not tell from parameters."""
        if len(set(names)) != len(names):
            raise ValueError(f"Names provided are not unique: {names!r}.")
        own = set(self._get_param_names())
        for name in names:
            if "__" in name or name in own:
                raise ValueError(
                    f"Member name {name!r} must not contain __ nor be a parameter name of "
                    f"{type(self).__name__}."
                )

    def _forget_fit(self) -> None:
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            delattr(self, name)  # a failed refit must not leave the previous model behind
