"""Medians, ratios to scikit-learn, and the markdown rendering of a benchmark run."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ModelSummary",
    "ScalingSummary",
    "render_comparison",
    "render_machine",
    "render_report",
    "render_scaling",
    "summarise_comparison",
    "summarise_scaling",
]

REFERENCE = "scikit-learn"
TWO_GIB = 2048.0


@dataclass(frozen=True)
class ModelSummary:
    """One library on one (family, dataset): medians over repeats, ratios to scikit-learn.

    A ratio is the median over repeats of ``this run / the reference's run of the same
    repeat``: the runs of one repeat are adjacent in time, so pairing them cancels slow drifts
    in the machine's load. Accuracy is compared as a difference (percentage points), RMSE as
    a ratio.
    """

    family: str
    dataset: str
    library: str
    metric: str
    runs: int
    failures: int
    fit_s: float | None
    predict_s: float | None
    latency_ms: float | None
    peak_pss_mib: float | None
    fit_delta_mib: float | None
    main_peak_rss_mib: float | None
    score: float | None
    fit_ratio: float | None
    predict_ratio: float | None
    latency_ratio: float | None
    memory_ratio: float | None
    score_vs_reference: float | None
    first_error: str | None


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _paired(
    runs: Sequence[dict[str, Any]],
    reference: dict[int, dict[str, Any]],
    compare: Callable[[float, float], float],
    key: str,
) -> float | None:
    values = []
    for run in runs:
        ref = reference.get(run["repeat"])
        if ref is None or run.get(key) is None or ref.get(key) is None:
            continue
        values.append(compare(run[key], ref[key]))
    return _median(values)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _accuracy_points(a: float, b: float) -> float:
    return 100.0 * (a - b)


def summarise_comparison(runs: Sequence[dict[str, Any]]) -> list[ModelSummary]:
    """One summary per (family, dataset, library), in the order the runs first appear."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["family"], run["dataset"], run["library"]), []).append(run)
    summaries = []
    for (family, dataset, library), group in groups.items():
        good = [run for run in group if run.get("error") is None]
        reference = {
            run["repeat"]: run
            for run in groups.get((family, dataset, REFERENCE), [])
            if run.get("error") is None
        }
        metric = group[0]["metric"]
        score_compare = _accuracy_points if metric == "accuracy" else _ratio
        summaries.append(
            ModelSummary(
                family=family,
                dataset=dataset,
                library=library,
                metric=metric,
                runs=len(group),
                failures=len(group) - len(good),
                fit_s=_median(run["fit_s"] for run in good),
                predict_s=_median(run["predict_s"] for run in good),
                latency_ms=_median(run["latency_ms"] for run in good),
                peak_pss_mib=_median(run["peak_pss_mib"] for run in good),
                fit_delta_mib=_median(run["fit_delta_mib"] for run in good),
                main_peak_rss_mib=_median(run["main_peak_rss_mib"] for run in good),
                score=_median(run["score"] for run in good),
                fit_ratio=_paired(good, reference, _ratio, "fit_s"),
                predict_ratio=_paired(good, reference, _ratio, "predict_s"),
                latency_ratio=_paired(good, reference, _ratio, "latency_ms"),
                memory_ratio=_paired(good, reference, _ratio, "peak_pss_mib"),
                score_vs_reference=_paired(good, reference, score_compare, "score"),
                first_error=next((run["error"] for run in group if run.get("error")), None),
            )
        )
    return summaries


@dataclass(frozen=True)
class ScalingSummary:
    n_rows: int
    runs: int
    fit_s: float | None
    peak_pss_mib: float | None
    fit_delta_mib: float | None
    first_error: str | None

    @property
    def us_per_row(self) -> float | None:
        return None if self.fit_s is None else 1e6 * self.fit_s / self.n_rows

    @property
    def within_2gib(self) -> bool | None:
        return None if self.peak_pss_mib is None else self.peak_pss_mib <= TWO_GIB


def summarise_scaling(runs: Sequence[dict[str, Any]]) -> list[ScalingSummary]:
    by_rows: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        by_rows.setdefault(run["n_rows"], []).append(run)
    summaries = []
    for n_rows, group in sorted(by_rows.items()):
        good = [run for run in group if run.get("error") is None]
        summaries.append(
            ScalingSummary(
                n_rows=n_rows,
                runs=len(group),
                fit_s=_median(run["fit_s"] for run in good),
                peak_pss_mib=_median(run["peak_pss_mib"] for run in good),
                fit_delta_mib=_median(run["fit_delta_mib"] for run in good),
                first_error=next((run["error"] for run in group if run.get("error")), None),
            )
        )
    return summaries


# --- markdown ---------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _short(error: str | None) -> str:
    """The last line of a traceback, fit for a table cell."""
    lines = [line.strip() for line in (error or "?").splitlines() if line.strip()]
    text = lines[-1] if lines else "?"
    text = text if len(text) <= 80 else text[:77] + "..."
    return text.replace("|", "\\|")


def _times(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _score(summary: ModelSummary) -> str:
    if summary.score is None:
        return "—"
    return f"{summary.score:.4f}" if summary.metric == "accuracy" else f"{summary.score:.3f}"


def _score_vs(summary: ModelSummary) -> str:
    value = summary.score_vs_reference
    if value is None or summary.library == REFERENCE:
        return ""
    return f"{value:+.2f} pp" if summary.metric == "accuracy" else f"{value:.3f}×"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render_machine(machine: dict[str, Any]) -> str:
    packages = ", ".join(f"{name} {version}" for name, version in machine["packages"].items())
    modified = " (engine/ has uncommitted changes)" if machine.get("engine_modified") else ""
    threads = ", ".join(f"{k}={v}" for k, v in machine["thread_environment"].items() if v)
    lines = [
        f"- CPU: {machine['cpu']}; {machine['usable_cpus']} usable of "
        f"{machine['logical_cpus']} logical CPUs; RAM {machine['memory_gib']} GiB",
        f"- {machine['os']}, Python {machine['python']}; {packages}",
        f"- coppice commit {machine['coppice_commit']}{modified}",
        f"- load average when the run started: {machine['load_average_at_start']:.2f}"
        + (f"; {threads}" if threads else ""),
    ]
    return "\n".join(lines)


def render_comparison(summaries: Sequence[ModelSummary]) -> str:
    header = [
        "dataset",
        "family",
        "library",
        "fit s",
        "fit ×sk",
        "predict s",
        "pred ×sk",
        "1-row ms",
        "1-row ×sk",
        "peak MiB",
        "mem ×sk",
        "fit Δ MiB",
        "score",
        "vs sk",
    ]
    rows = []
    for s in summaries:
        if s.fit_s is None:
            rows.append(
                [s.dataset, s.family, s.library, f"failed: {_short(s.first_error)}"]
                + [""] * (len(header) - 4)
            )
            continue
        is_reference = s.library == REFERENCE
        rows.append(
            [
                s.dataset,
                s.family,
                s.library + (f" ({s.failures} failed)" if s.failures else ""),
                _num(s.fit_s),
                "" if is_reference else _times(s.fit_ratio),
                _num(s.predict_s, 3),
                "" if is_reference else _times(s.predict_ratio),
                _num(s.latency_ms, 3),
                "" if is_reference else _times(s.latency_ratio),
                _num(s.peak_pss_mib, 0),
                "" if is_reference else _times(s.memory_ratio),
                _num(s.fit_delta_mib, 0),
                _score(s),
                _score_vs(s),
            ]
        )
    return "\n".join(_table(header, rows))


def render_scaling(summaries: Sequence[ScalingSummary]) -> str:
    header = ["rows", "fit s", "µs per row", "peak MiB", "fit Δ MiB", "within 2 GiB"]
    rows = []
    for s in summaries:
        if s.fit_s is None:
            rows.append([f"{s.n_rows:,}", f"failed: {_short(s.first_error)}", "", "", "", ""])
            continue
        within = {True: "yes", False: "no", None: "—"}[s.within_2gib]
        rows.append(
            [
                f"{s.n_rows:,}",
                _num(s.fit_s),
                _num(s.us_per_row, 1),
                _num(s.peak_pss_mib, 0),
                _num(s.fit_delta_mib, 0),
                within,
            ]
        )
    return "\n".join(_table(header, rows))


def render_report(
    payload: dict[str, Any],
    summaries: Sequence[ModelSummary],
    scaling: Sequence[ScalingSummary],
) -> str:
    """The whole markdown report: machine, settings, results table, scaling table."""
    settings = payload["settings"]
    parts = ["## Machine", "", render_machine(payload["machine"]), "", "## Settings", ""]
    parts.append(
        f"- n_estimators={settings['n_estimators']}, n_jobs={settings['n_jobs']}, "
        f"{settings['repeats']} repeat(s) with the libraries interleaved in each; medians over "
        "repeats; ratios (×sk) are medians of per-repeat ratios to scikit-learn"
    )
    parts += [f"- dataset {d['name']}: {d['description']}" for d in payload["datasets"]]
    parts += [f"- {m['family']} / {m['library']}: {m['settings']}" for m in payload["models"]]
    if summaries:
        parts += ["", "## Results", "", render_comparison(summaries), "", _LEGEND]
    if scaling:
        parts += [
            "",
            f"## Scaling: coppice RandomForestClassifier, {settings['n_estimators']} trees, "
            f"n_jobs={settings['n_jobs']}, make_classification with 40 features",
            "",
            render_scaling(scaling),
        ]
    parts += ["", f"Total wall time: {payload['wall_time_s'] / 60:.1f} min."]
    return "\n".join(parts) + "\n"


_LEGEND = (
    "fit s: wall time of `fit` on the training rows. predict s: `predict` on all test rows "
    "(second call; the first is in the JSON). 1-row ms: median of `predict` on one row. "
    "peak MiB: peak during `fit` of the PSS summed over the fitting process and all its "
    "descendants (sampled); fit Δ: that peak minus the same sum just before `fit` (data loaded, "
    "library imported). score: test accuracy or RMSE; vs sk: accuracy difference in "
    "percentage points, or RMSE ratio (below 1 is better)."
)
