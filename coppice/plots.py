"""Charts of a model's importances, learning curves, contributions, validation ROC curves and
residuals, with matplotlib (imported on use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("plotting needs matplotlib: pip install matplotlib") from error
    _, new_ax = plt.subplots()
    return new_ax


def plot_importance(
    features: Sequence[dict[str, Any]], *, title: str, top: int = 20, ax: Any = None
) -> Any:
    """Bars of the ``top`` most important features, the most important at the top; error
    bars where the importance kind has a spread."""
    ax = _axes(ax)
    shown = list(features)[:top][::-1]
    names = [str(item["name"]) for item in shown]
    values = [float(item["importance"]) for item in shown]
    spreads = [item.get("std") for item in shown]
    errors = None
    if all(spread is not None for spread in spreads):
        errors = [float(spread) for spread in spreads if spread is not None]
    ax.barh(names, values, xerr=errors)
    ax.set_xlabel("importance")
    ax.set_title(title)
    return ax


def plot_curves(curves: dict[str, Any], *, title: str, ax: Any = None) -> Any:
    """One line per series the model has (``train``, ``validation``, ``oob``) by iteration."""
    ax = _axes(ax)
    iterations = curves.get("iterations") or []
    for series in ("train", "validation", "oob"):
        values = curves.get(series) or []
        if values:
            ax.plot(iterations[: len(values)], values, label=series)
    ax.set_xlabel("iteration")
    ax.set_ylabel(str(curves.get("metric") or ""))
    ax.set_title(title)
    ax.legend()
    return ax


def plot_roc(roc: dict[str, Any], *, title: str, ax: Any = None) -> Any:
    """One line per class label's ROC curve (``{"fpr", "tpr", "auc"}``), and the diagonal."""
    ax = _axes(ax)
    for label, curve in roc.items():
        auc = curve.get("auc")
        ax.plot(
            curve["fpr"], curve["tpr"], label=label if auc is None else f"{label} (AUC {auc:.3f})"
        )
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_residuals(residuals: dict[str, Any], *, title: str, ax: Any = None) -> Any:
    """Actual minus predicted against predicted, one dot a row, with the line y = 0."""
    ax = _axes(ax)
    pairs = [
        (float(p), float(a))
        for p, a in zip(residuals["predicted"], residuals["actual"], strict=True)
        if p is not None and a is not None
    ]
    ax.scatter([p for p, _ in pairs], [a - p for p, a in pairs], s=8, alpha=0.6)
    ax.axhline(0.0, linestyle="--", color="grey", linewidth=1)
    ax.set_xlabel("predicted")
    ax.set_ylabel("actual − predicted")
    ax.set_title(title)
    return ax


def plot_contributions(
    features: Sequence[str],
    values: Sequence[float],
    bias: float,
    *,
    title: str,
    top: int = 20,
    ax: Any = None,
) -> Any:
    """One row's contributions as bars, the largest magnitudes at the top; the features left
    out are summed into one bar so the bars and the bias still add up to the output."""
    ax = _axes(ax)
    order = sorted(range(len(values)), key=lambda i: abs(values[i]), reverse=True)
    shown = order[:top]
    names = [str(features[i]) for i in shown]
    heights = [float(values[i]) for i in shown]
    if len(order) > top:
        names.append(f"{len(order) - top} other features")
        heights.append(float(sum(values[i] for i in order[top:])))
    names, heights = names[::-1], heights[::-1]
    ax.barh(names, heights, color=["tab:red" if h > 0 else "tab:blue" for h in heights])
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(f"contribution (bias {bias:.4g}; bias + bars = {bias + sum(heights):.4g})")
    ax.set_title(title)
    return ax
