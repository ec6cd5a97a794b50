"""A hyper-parameter search on the server: its progress, leaderboard, best model; cancelling it.

A search's candidates are ordinary jobs (``search.jobs()``); the search ranks them by k-fold
cross-validation on one metric (docs/searches.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from coppice._running import ENDED, ServerRun
from coppice.errors import CoppiceError, SearchFailedError
from coppice.models import _pandas

if TYPE_CHECKING:
    from coppice.jobs import Job
    from coppice.models import Model
    from coppice.pagination import Page

LEADERBOARD_COLUMNS = ("rank", "model_id", "method", "kind", "fit_seconds", "iter", "n_resources")


Candidates = Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any] | str]


def candidate_spaces(candidates: Candidates) -> list[dict[str, Any]]:
    """The API's ``candidates`` list from ``{"method": {params}}``, a list of
    ``{"method", "params"}``, or a list of method names (each at its defaults)."""
    if isinstance(candidates, Mapping):
        return [{"method": m, "params": dict(params)} for m, params in candidates.items()]
    if isinstance(candidates, str):
        raise TypeError(f"candidates must be a list or a mapping of methods, not {candidates!r}")
    return [{"method": c} if isinstance(c, str) else dict(c) for c in candidates]


class Search(ServerRun):
    """A search as last seen; :meth:`refresh` (its leaderboard included) and :meth:`wait`
    look again, and :meth:`cancel` stops the candidates left and keeps what finished.

    Its :attr:`status` is ``running``, ``stacking`` (building the ensemble), ``succeeded``,
    ``failed`` (no candidate succeeded) or ``cancelled`` (what finished is kept); its
    :attr:`progress`, the share of the planned candidates that has ended.
    """

    kind = "search"
    collection = "searches"

    def __repr__(self) -> str:
        return f"<Search {self.id} {self.status} {self.strategy} {self.metric} {self.stage!r}>"

    @property
    def name(self) -> str | None:
        return self.info.get("name")

    @property
    def strategy(self) -> str:
        return str(self.info.get("strategy", ""))

    @property
    def metric(self) -> str:
        return str(self.info.get("metric", ""))

    @property
    def direction(self) -> str:
        """``maximize`` or ``minimize``: which way :attr:`metric` is better."""
        return str(self.info.get("direction", ""))

    @property
    def n_models(self) -> int:
        """The models ranked so far."""
        return int(self.info.get("n_models") or 0)

    @property
    def best_model_id(self) -> str | None:
        return self.info.get("best_model_id")

    @property
    def stack_model_id(self) -> str | None:
        """The stacked ensemble's model, once built (``stack=True``)."""
        return self.info.get("stack_model_id")

    @property
    def job_counts(self) -> dict[str, int]:
        """The candidates' jobs by status (``queued``, ``running``, ``succeeded``, ...)."""
        return dict(self.info.get("jobs") or {})

    @property
    def registration(self) -> dict[str, Any] | None:
        """With ``register_as``: ``{"status", "name", "version", "model_id", "detail"}``."""
        return self.info.get("registration")

    @property
    def notes(self) -> list[str]:
        """What the server wants said: why there is no ensemble, why the search failed, ..."""
        return list(self.info.get("notes") or [])

    @property
    def planned(self) -> int | None:
        """How many candidates the search plans to train (halving: over every rung)."""
        plan = self.info.get("plan") or {}
        rungs = plan.get("rungs")
        if isinstance(rungs, list):
            return sum(int(rung["candidates"]) for rung in rungs)
        planned = plan.get("n_configurations")
        return None if planned is None else int(planned)

    @property
    def stage(self) -> str:
        """Where it stands, for people: "2/3 candidates, best roc_auc 0.9345"."""
        best = self._leaderboard_rows()[:1] if "leaderboard" in self.info else []
        best_text = f"best {self.metric} {best[0]['metric']['mean']:.4g}" if best else ""
        if self.status == "running":
            counts = self.job_counts
            ended = sum(counts.get(s, 0) for s in ENDED)
            planned = self.planned
            text = f"{min(ended, planned)}/{planned} candidates" if planned else f"{ended} ended"
            return ", ".join(filter(None, [text, best_text]))
        if self.status == "stacking":
            return "building the stacked ensemble"
        if self.status == "failed":
            return "; ".join(self.notes) or "no candidate succeeded"
        return ", ".join(filter(None, [f"{self.n_models} ranked", best_text]))

    def wait(
        self,
        progress: bool = False,
        *,
        timeout: float | None = None,
        file: TextIO | None = None,
    ) -> Search:
        """Wait for the search to end; returns it, with its final leaderboard.

        With ``progress``, a bar (or lines, without tqdm) on ``file`` (stderr) shows the
        candidates ended of those planned and the best score so far. Ctrl-C asks the server
        to cancel the search, then raises ``KeyboardInterrupt``. A search that ends
        ``failed`` raises :class:`~coppice.errors.SearchFailedError`; one that ends
        ``cancelled`` is returned (its finished models are ranked); ``TimeoutError`` when
        ``timeout`` seconds pass first (the search goes on).
        """
        self._wait_until_ended(progress, timeout, file)
        if self.status == "failed":
            raise SearchFailedError(self.id, self.notes or self._failures())
        return self

    def _failures(self) -> list[str]:
        """Why the candidates failed, as their jobs say (the first few)."""
        failed = self.jobs(status="failed", limit=3)
        reasons = []
        for job in failed:
            error = job.info.get("error") or {}
            reasons.append(f"job {job.id} failed ({error.get('code')}): {error.get('message')}")
        return [f"{failed.total} candidates failed", *reasons] if reasons else []

    def _leaderboard_rows(self) -> list[dict[str, Any]]:
        if "leaderboard" not in self.info:  # a listing's item: read the whole search
            self.refresh()
        return list(self.info["leaderboard"])

    @property
    def leaderboard(self) -> Any:
        """The ranked models as last seen, best first: a DataFrame when pandas is installed,
        else a list of dicts. Columns: ``rank``, ``model_id``, ``method``, the metric's mean
        (named after it, e.g. ``roc_auc``) and ``<metric>_std`` over the folds, ``kind``
        (``candidate`` or ``stack``), ``fit_seconds``, ``iter`` and ``n_resources``
        (halving's rung and rows), ``params`` and ``job_id``."""
        metric = self.metric
        rows = [
            {key: row.get(key) for key in LEADERBOARD_COLUMNS[:3]}
            | {metric: row["metric"]["mean"], f"{metric}_std": row["metric"].get("std")}
            | {key: row.get(key) for key in LEADERBOARD_COLUMNS[3:]}
            | {"params": row.get("params"), "job_id": row.get("job_id")}
            for row in self._leaderboard_rows()
        ]
        pandas = _pandas()
        if pandas is None:
            return rows
        columns = [*LEADERBOARD_COLUMNS[:3], metric, f"{metric}_std", *LEADERBOARD_COLUMNS[3:]]
        frame = pandas.DataFrame(rows, columns=[*columns, "params", "job_id"])
        frame.attrs.update(metric=metric, direction=self.direction)
        return frame

    @property
    def best_model(self) -> Model:
        """The leaderboard's first model as last seen (the ensemble, if it won): the best so
        far while the search runs. Raises :class:`~coppice.errors.CoppiceError` while no model
        is ranked."""
        model_id = self.best_model_id
        if model_id is None:
            rows = self._leaderboard_rows()
            model_id = rows[0]["model_id"] if rows else None
        if model_id is None:
            raise CoppiceError(f"search {self.id} has no ranked model yet ({self.stage})")
        return self._client.model(model_id)

    def jobs(self, *, status: str | None = None, limit: int = 50, offset: int = 0) -> Page[Job]:
        """The candidates' jobs (failed ones say why they failed), newest first."""
        return self._client.jobs(search_id=self.id, status=status, limit=limit, offset=offset)
