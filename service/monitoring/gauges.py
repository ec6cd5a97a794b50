"""The prediction log's Prometheus metrics, read from the app's ``PredictionLog`` when scraped.

``coppice_feature_psi{model,feature}`` and ``coppice_prediction_psi{model}`` are the latest
report's figures (each ``GET /v1/models/{ref}/monitoring`` sets them, docs/monitoring.md);
``coppice_predictions_logged_total{model}`` counts rows written by this process, and the
dropped and failed counters what a full queue or a failing database cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.monitoring.log import PredictionLog


class MonitoringCollector(Collector):
    def __init__(self, log: Callable[[], PredictionLog | None]) -> None:
        self._log = log

    def describe(self) -> list[Metric]:
        return self._families(None)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families(self._log()))

    @staticmethod
    def _families(log: PredictionLog | None) -> list[Metric]:
        feature = GaugeMetricFamily(
            "coppice_feature_psi",
            "PSI of a feature's live rows against its training rows (latest report).",
            labels=["model", "feature"],
        )
        prediction = GaugeMetricFamily(
            "coppice_prediction_psi",
            "PSI of the live predictions against training's (latest report).",
            labels=["model"],
        )
        logged = CounterMetricFamily(
            "coppice_predictions_logged",
            "Predicted rows written to the prediction log by this process.",
            labels=["model"],
        )
        dropped = CounterMetricFamily(
            "coppice_prediction_log_dropped",
            "Predicted rows not logged: the log's queue was full, or its database failed.",
            labels=["reason"],
        )
        if log is not None:
            for model_id, by_feature in list(log.feature_psi.items()):
                for name, value in list(by_feature.items()):
                    feature.add_metric([model_id, name], value)
            for model_id, value in list(log.prediction_psi.items()):
                prediction.add_metric([model_id], value)
            for model_id, count in list(log.counts.logged.items()):
                logged.add_metric([model_id], count)
            dropped.add_metric(["queue_full"], log.counts.dropped)
            dropped.add_metric(["write_failed"], log.counts.failed)
        return [feature, prediction, logged, dropped]
