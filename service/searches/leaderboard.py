"""The leaderboard: every trained candidate (and the ensemble) ranked by its CV score.

Rows are ranked by rung first, so halving's winner always comes from its last rung (a model
scored on a third of the rows is not comparable to one scored on all; scikit-learn#33723),
then by the metric in its direction (H2O's ``Leaderboard.java`` sorts AUC descending and
losses ascending), then by fit time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.db.tables import JobRecord, JobStatus, ModelRecord, SearchCandidateRecord
from service.searches.schemas import LeaderboardRow, MetricScore
from service.searches.validation import direction_of


@dataclass(frozen=True, slots=True)
class Entry:
    candidate: SearchCandidateRecord
    job: JobRecord
    model: ModelRecord
    mean: float
    std: float | None


def entries(
    rows: list[tuple[SearchCandidateRecord, JobRecord, ModelRecord | None]], metric: str
) -> list[Entry]:
    """The scored, succeeded candidates, best first."""
    scored = []
    for candidate, job, model in rows:
        if job.status != JobStatus.SUCCEEDED or model is None:
            continue
        score = cv_score(model.metrics, metric)
        if score is not None:
            scored.append(Entry(candidate, job, model, score[0], score[1]))
    sign = -1.0 if direction_of(metric) == "maximize" else 1.0
    return sorted(
        scored,
        key=lambda e: (-e.candidate.rung, sign * e.mean, fit_seconds(e.job) or 0.0, e.job.id),
    )


def cv_score(metrics: dict[str, Any], metric: str) -> tuple[float, float | None] | None:
    """``(mean, std)`` of ``metric`` over the folds, or None when it was not computed."""
    value = ((metrics or {}).get("cv") or {}).get(metric) or {}
    mean = value.get("mean")
    return None if mean is None else (float(mean), value.get("std"))


def fit_seconds(job: JobRecord) -> float | None:
    if job.started_at is None or job.finished_at is None:
        return None
    return round((job.finished_at - job.started_at).total_seconds(), 3)


def rows(ranked: list[Entry]) -> list[LeaderboardRow]:
    return [
        LeaderboardRow(
            rank=rank,
            model_id=entry.model.id,
            job_id=entry.job.id,
            method=entry.job.method,
            params=dict(entry.job.params),
            metric=MetricScore(mean=entry.mean, std=entry.std),
            fit_seconds=fit_seconds(entry.job),
            iter=entry.candidate.rung,
            n_resources=entry.candidate.n_rows,
            kind="stack" if entry.candidate.kind == "stack" else "candidate",
        )
        for rank, entry in enumerate(ranked, start=1)
    ]
