"""``run_training``: fit one job's estimator, validate it, and describe the result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

import engine
from engine.boosting._gradient_base import BaseGradientBoosting
from engine.boosting._xgboost_base import BaseXGBoost
from engine.callbacks import TrainingInterrupted
from engine.tree import Binned
from engine.tree._binned import ROUTING_CHUNK_ROWS, routing_values
from engine.tree._binning import BinMapper
from service.class_columns import over_classes
from service.datasets.columns import ColumnData
from service.methods.catalog import CATALOG, Method, Task
from service.methods.params import ParamsInvalid, build_estimator, resolve_params
from service.models.importance import available_kinds
from service.monitoring.baseline import feature_baseline, training_baseline
from service.training import fit_steps
from service.training.curves import RowValues, learning_curves
from service.training.data import PartRows, TrainingData, prepare, prepare_from_parts
from service.training.diagnostics import validation_diagnostics
from service.training.fit_steps import (
    FIT_SHARE,
    Progress,
    ProgressReport,
    StopCheck,
    drop_prediction_caches,
    impurity_importances,
    job_estimator,
    n_estimators_of,
)
from service.training.metrics import (
    classification_metrics,
    json_number,
    regression_metrics,
    summarise_folds,
)
from service.training.out_of_core import run_out_of_core
from service.training.part_table import PartTable
from service.training.spec import TrainingError, TrainingOutcome, TrainingSpec
from service.training.split import fold_assignments, holdout_split
from service.training.worker_parts import first_pass_on_workers, read_worker_part, worker_parts

Rows = npt.NDArray[np.intp]


def run_training(
    spec: TrainingSpec,
    columns: Mapping[str, ColumnData],
    on_progress: ProgressReport,
    should_stop: StopCheck,
) -> TrainingOutcome:
    """Train the job ``spec`` describes on ``columns`` (keyed by name; features and target).

    ``on_progress(fraction, stage)`` is called after every iteration of every fit (not
    throttled); ``should_stop()`` is polled at the same points and before each fit, and
    when it returns True, ``engine.TrainingInterrupted`` propagates. Raises ``TrainingError``
    when the data or settings make training impossible (retrying will not help).
    """
    method, task, requested = _resolve(spec)
    resolved = _with_oob(requested, spec.params)
    if (
        resolved is not requested
        and isinstance(columns, PartTable)
        and bins_from_parts(method.name, requested)
        and _out_of_core(method, task, requested, spec)
    ):
        # Out-of-bag votes need every row's predictions in one place: a forest that fits out
        # of core without them is not given them unasked (as service.jobs estimated it).
        resolved = requested
    if (
        isinstance(columns, PartTable)
        and bins_from_parts(method.name, resolved)
        and splits_on_workers(spec.validation)
        and _out_of_core(method, task, resolved, spec)
    ):
        # Out of core with a holdout or none: the target, the split and the metrics stay on
        # the workers too, so this process holds nothing that grows with the rows.
        return run_out_of_core(spec, columns, method, task, resolved, on_progress, should_stop)
    if isinstance(columns, PartTable) and bins_from_parts(method.name, resolved):
        # A fit out of core on the cluster: the workers make the first pass too, so this
        # process opens no part at all (issue 27).
        answers = (
            first_pass_on_workers(
                engine.parallel.active_backend().client,  # type: ignore[union-attr]
                columns.store,
                columns.parts,
                spec.features,
                spec.target,
                columns.kinds,
            )
            if _out_of_core(method, task, resolved, spec)
            else None
        )
        data = prepare_from_parts(spec, columns, answers)
        del answers  # the parts' target columns, copied into data.y
    else:
        data = prepare(spec, columns)
    classification = task == Task.CLASSIFICATION
    if spec.validation.get("rows"):  # successive halving's early rungs (service.searches)
        data = subsample(data, int(spec.validation["rows"]), classification, spec.seed)
    n_rows = data.y.shape[0]
    folds = int(spec.validation["folds"]) if "folds" in spec.validation else 0
    holdout = float(spec.validation.get("holdout", 0.0)) if not folds else 0.0
    progress = Progress(on_progress, should_stop, method.progress_unit, folds + 1)

    metrics: dict[str, Any] = {
        "train": None,
        "validation": None,
        "oob": None,
        "cv": None,
        "diagnostics": None,
        "importance_kinds": None,
        "monitoring": None,
    }
    # A search's candidates keep what each fold model predicted for its held-out rows: the
    # level-one data a stacked ensemble learns from without refitting them (Wolpert 1992).
    out_of_fold = (
        np.full((n_rows, len(data.classes) if classification and data.classes else 1), np.nan)
        if folds and spec.validation.get("keep_predictions")
        else None
    )
    if folds:
        assignment = fold_assignments(data.y, folds, classification=classification, seed=spec.seed)
        per_fold = []
        for fold in range(folds):
            train_rows = np.flatnonzero(assignment != fold).astype(np.intp)
            held_out = np.flatnonzero(assignment == fold).astype(np.intp)
            progress.start(fold, f"fold {fold + 1}/{folds}: ")
            model = _fit(method, task, resolved, data, train_rows, spec, progress, held_out)
            per_fold.append(_evaluate(model, data, held_out, classification, out_of_fold))
            _forget_codes(data, model)
        metrics["cv"] = summarise_folds(per_fold)
        train_rows, validation_rows = np.arange(n_rows, dtype=np.intp), None
    elif holdout > 0:
        train_rows, validation_rows = holdout_split(
            data.y, holdout, classification=classification, seed=spec.seed
        )
    else:
        train_rows, validation_rows = np.arange(n_rows, dtype=np.intp), None

    progress.start(folds, "final fit: " if folds else "")
    model = _fit(method, task, resolved, data, train_rows, spec, progress, validation_rows)
    on_progress(FIT_SHARE, "computing metrics")
    scored_rows = scored_training_rows(data.y, train_rows, classification, spec.seed)
    metrics["train"] = _evaluate(model, data, scored_rows, classification)
    if validation_rows is not None:
        outputs = _outputs(model, data, validation_rows, classification)
        metrics["validation"] = _scored(outputs, data, validation_rows)
        # The points behind the validation scores, for the model page's plots.
        metrics["diagnostics"] = validation_diagnostics(
            data.y[validation_rows],
            outputs.proba,
            outputs.predicted,
            data.classes if classification else None,
            seed=spec.seed,
        )
    metrics["oob"] = _oob_metrics(model, data, train_rows, classification)
    # What live predictions are compared with (service.monitoring): the training rows'
    # histograms, and the model's predictions on the rows it is validated on (else scored on).
    baseline_outputs = (
        outputs
        if validation_rows is not None
        else _outputs(model, data, scored_rows, classification)
    )
    # From the parts, the rows the binning read (all training rows up to the binner's
    # subsample, a uniform sample of them past it) stand for the training rows: described
    # when they were read (_Coded.described).
    coded = _codes_of(data, model)
    metrics["monitoring"] = training_baseline(
        data.X[train_rows] if coded is None else coded.described,
        data.features,
        data.categories,
        _predicted(baseline_outputs, data.classes),
        data.classes if classification else None,
        rows=int(train_rows.size),
    )
    curves = learning_curves(
        method.name,
        model,
        classification=classification,
        classes=data.classes,
        train=(_row_values(data, coded, scored_rows), data.y[scored_rows]),
        validation=None
        if validation_rows is None
        else (_row_values(data, coded, validation_rows), data.y[validation_rows]),
        events=progress.events,
    )
    _forget_codes(data, model)
    importances = impurity_importances(model, data)
    # Which kinds of importance the model has follows from the fitted model, which the API's
    # reads of the model should not have to load: kept here, beside the metrics.
    metrics["importance_kinds"] = available_kinds(
        method.name, model, list(importances), has_validation=validation_rows is not None
    )
    # Not saved here: the fit process streams the artifact from the model into the store
    # (TrainingOutcome.artifact_pieces), never holding its bytes whole.
    drop_prediction_caches(model)
    return TrainingOutcome(
        model=model,
        features=data.features,
        classes=data.classes,
        encoding={"categories": data.categories, "classes": data.classes},
        resolved_params=resolved,
        metrics=metrics,
        curves=curves,
        importances=importances,
        n_estimators=n_estimators_of(model),
        n_rows=n_rows,
        n_train_rows=int(train_rows.size),
        n_validation_rows=0 if validation_rows is None else int(validation_rows.size),
        # NaN left over: a classifier without probabilities, which cannot be stacked.
        out_of_fold=None if out_of_fold is None or np.isnan(out_of_fold).any() else out_of_fold,
    )


def _resolve(spec: TrainingSpec) -> tuple[Method, Task, dict[str, Any]]:
    method = CATALOG.get(spec.method)
    if method is None:
        raise TrainingError("unknown_method", f"There is no method '{spec.method}'.")
    try:
        task = Task(spec.task)
        method.estimator_class(task)
    except (ValueError, KeyError):
        raise TrainingError(
            "unsupported_task", f"Method '{spec.method}' does not do '{spec.task}'."
        ) from None
    try:
        resolved = resolve_params(method.name, task, spec.params)
    except ParamsInvalid as error:
        raise TrainingError("invalid_params", str(error)) from None
    return method, task, resolved


def _with_oob(resolved: dict[str, Any], requested: Mapping[str, Any]) -> dict[str, Any]:
    """Turn on out-of-bag estimates where bootstrap leaves rows out, unless asked not to.

    They cost one prediction per member on its out-of-bag rows and give the OOB metrics and
    the OOB error curve for free.
    """
    if "oob_score" not in resolved or "oob_score" in requested:
        return resolved
    leaves_rows_out = resolved.get("bootstrap") is True or resolved.get("max_samples") not in (
        None,
        1.0,
    )
    return {**resolved, "oob_score": True} if leaves_rows_out else resolved


def _fit(
    method: Method,
    task: Task,
    resolved: Mapping[str, Any],
    data: TrainingData,
    rows: Rows,
    spec: TrainingSpec,
    progress: Progress,
    evaluated: Rows | None = None,
) -> Any:
    """The fitted estimator; from parts, the codes of ``rows`` and ``evaluated`` (rows its
    metrics are computed on) are kept beside it until :func:`_forget_codes`."""
    if task == Task.CLASSIFICATION:
        _check_two_classes(data.y[rows])
    estimator = job_estimator(method, task, resolved, spec, data.categorical_features)
    try:
        if data.parts is None:
            estimator.fit(data.X[rows], data.y[rows], callbacks=[progress])
        elif fits_out_of_core(estimator):
            _fit_out_of_core(estimator, data, data.parts, rows, evaluated, spec, progress)
        else:
            binned = _bin_from_parts(estimator, data, data.parts, rows, evaluated, progress)
            if data.classes is None:
                estimator.fit(binned, data.y[rows], callbacks=[progress])
            else:
                # The labels as their indices into the run's classes (1 byte a row, not the
                # 12 of 3-letter strings, through the whole fit), taken after the binning,
                # whose peak holds a part's bytes; the fitted classes back to the labels.
                estimator.fit(binned, class_codes(data, rows), callbacks=[progress])
                estimator.classes_ = np.asarray(data.classes)[
                    np.asarray(estimator.classes_).astype(np.intp)
                ]
    except TrainingInterrupted:
        raise
    except ValueError as error:  # the engine refusing this data: deterministic
        raise TrainingError("fit_failed", f"Training failed: {error}") from None
    return estimator


# Rows' labels turned into class indices at a time (class_codes): a small temporary.
CODE_ROWS = 1 << 16


def class_codes(data: TrainingData, rows: Rows) -> npt.NDArray[np.signedinteger[Any]]:
    """Each of ``rows``' label as its index into ``data.classes`` (sorted, as ``np.unique``
    sorts the labels), in the narrowest integer type that holds them: a classifier fitted on
    them encodes them as it would the labels, in the same order."""
    assert data.classes is not None
    classes = np.asarray(data.classes)
    codes = np.empty(rows.size, dtype=np.min_scalar_type(-max(classes.size, 1)))
    for start in range(0, rows.size, CODE_ROWS):
        stop = min(start + CODE_ROWS, rows.size)
        codes[start:stop] = np.searchsorted(classes, data.y[rows[start:stop]])
    return codes


def _check_two_classes(y: npt.NDArray[Any]) -> None:
    if np.unique(y).size < 2:
        raise TrainingError(
            "one_class",
            f"A training split holds only one class ({y[0]!r}); use fewer folds, a smaller "
            "holdout, or more rows of the other classes.",
        )


def scored_training_rows(
    y: npt.NDArray[Any], train_rows: Rows, classification: bool, seed: int
) -> Rows:
    """The training rows ``metrics.train`` and the curves' train series are computed on.

    All of them up to ``TRAIN_SCORE_ROWS``; past it a sample of that many, drawn with the
    job's seed and stratified for classification — as scikit-learn's HistGradientBoosting
    scores its training data. Scoring every row costs as much as predicting them (about 1.5 s
    of a 100-tree forest's 80,000 rows, most of the service's overhead on such a job), for a
    figure whose standard error on 10,000 rows is at most half a point of accuracy.
    """
    if train_rows.size <= fit_steps.TRAIN_SCORE_ROWS:
        return train_rows
    fraction = fit_steps.TRAIN_SCORE_ROWS / train_rows.size
    _, sample = holdout_split(y[train_rows], fraction, classification=classification, seed=seed)
    return train_rows[sample]


class _Outputs(NamedTuple):
    """What a model gives for some rows: class probabilities, or predicted labels or values."""

    proba: npt.NDArray[np.float64] | None  # one column per class (classifiers that have them)
    predicted: npt.NDArray[Any] | None  # labels (classifiers without probabilities) or values


def _outputs(model: Any, data: TrainingData, rows: Rows, classification: bool) -> _Outputs:
    coded = _codes_of(data, model)
    if coded is not None and rows.size > ROUTING_CHUNK_ROWS:  # a chunk of rows at a time
        pieces = [
            _outputs(model, data, rows[start : start + ROUTING_CHUNK_ROWS], classification)
            for start in range(0, rows.size, ROUTING_CHUNK_ROWS)
        ]
        proba, predicted = [p.proba for p in pieces], [p.predicted for p in pieces]
        return _Outputs(
            None if proba[0] is None else np.concatenate(proba),  # type: ignore[arg-type]
            None if predicted[0] is None else np.concatenate(predicted),  # type: ignore[arg-type]
        )
    X = data.X[rows] if coded is None else coded.values(rows)
    if not classification:
        return _Outputs(None, np.asarray(model.predict(X), dtype=np.float64))
    assert data.classes is not None
    if not hasattr(model, "predict_proba"):
        labels = np.asarray([str(label) for label in np.asarray(model.predict(X)).tolist()])
        return _Outputs(None, labels)
    return _Outputs(_proba(model, X, data.classes), None)


def _predicted(outputs: _Outputs, classes: list[str] | None) -> npt.NDArray[Any]:
    """The labels or values behind ``outputs``: a classifier's argmax of its probabilities."""
    if outputs.proba is not None and classes is not None:
        labels: npt.NDArray[Any] = np.asarray(classes)[np.argmax(outputs.proba, axis=1)]
        return labels
    assert outputs.predicted is not None
    return outputs.predicted


def _evaluate(
    model: Any,
    data: TrainingData,
    rows: Rows,
    classification: bool,
    out_of_fold: npt.NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    """Metrics of ``model`` on ``rows``; its outputs there also go into ``out_of_fold``."""
    return _scored(_outputs(model, data, rows, classification), data, rows, out_of_fold)


def _scored(
    outputs: _Outputs,
    data: TrainingData,
    rows: Rows,
    out_of_fold: npt.NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    y = data.y[rows]
    if data.classes is not None:
        if outputs.proba is None:
            return classification_metrics(y, None, data.classes, predicted=outputs.predicted)
        if out_of_fold is not None:
            out_of_fold[rows] = outputs.proba
        return classification_metrics(y, outputs.proba, data.classes)
    assert outputs.predicted is not None
    if out_of_fold is not None:
        out_of_fold[rows, 0] = outputs.predicted
    return regression_metrics(y, outputs.predicted)


def subsample(data: TrainingData, n_rows: int, classification: bool, seed: int) -> TrainingData:
    """``n_rows`` of the rows (stratified for classification), drawn with the job's seed.

    Successive halving trains its early rungs on such a share of the rows (Jamieson &
    Talwalkar 2016); the class list stays that of all rows, so every rung's models agree.
    """
    total = data.y.shape[0]
    if n_rows >= total:
        return data
    _, rows = holdout_split(data.y, n_rows / total, classification=classification, seed=seed)
    if data.parts is not None:
        return replace(data, y=data.y[rows], parts=replace(data.parts, rows=data.parts.at(rows)))
    return replace(data, X=data.X[rows], y=data.y[rows])


def _proba(model: Any, X: npt.NDArray[np.float64], classes: list[str]) -> npt.NDArray[np.float64]:
    """Probabilities over all ``classes``; a class a fold's model never saw gets 0."""
    return over_classes(
        np.asarray(model.predict_proba(X), dtype=np.float64), model.classes_, classes
    )


def _oob_metrics(
    model: Any, data: TrainingData, rows: Rows, classification: bool
) -> dict[str, Any] | None:
    """The out-of-bag metric set, from the figures the fitted ensemble kept.

    The engine averages each training row's out-of-bag votes (``oob_decision_function_``,
    ``oob_prediction_``; NaN for a row every member drew) and scores them (``oob_score_``:
    accuracy or R²; Breiman 2001). The headline score is the engine's own; the rest of the
    set is computed from its votes on the rows out of bag at least once.
    """
    y = data.y[rows]
    if classification and hasattr(model, "oob_decision_function_"):
        assert data.classes is not None
        scores = np.asarray(model.oob_decision_function_, dtype=np.float64)
        seen = np.all(np.isfinite(scores), axis=1)
        if not seen.any():
            return None
        scores = over_classes(scores[seen], model.classes_, data.classes)
        return {
            **classification_metrics(y[seen], scores, data.classes),
            "accuracy": json_number(model.oob_score_),
        }
    if not classification and hasattr(model, "oob_prediction_"):
        predicted = np.asarray(model.oob_prediction_, dtype=np.float64)
        seen = np.isfinite(predicted)
        if not seen.any():
            return None
        return {**regression_metrics(y[seen], predicted[seen]), "r2": json_number(model.oob_score_)}
    return None


# Methods whose estimators fit from bin codes alone (engine.tree.Binned): their fits read the
# parts into the binned matrix, and so does bagging whose member is a decision tree (the
# engine bags trees as a forest, on one binned matrix). Every other method reads the columns
# whole, as floats: linear models, k-NN, naive Bayes and the combiners need the values;
# AdaBoost, Arc-x4 and RegionBoost, bagging of any other learner, XGBoost's exact method and
# gradient boosting with early stopping (its holdout is drawn before binning) bin or weigh
# the float table themselves (docs/engine.md).
BINNED_METHODS = frozenset(
    {"decision_tree", "random_forest", "extra_trees", "xgboost", "gradient_boosting"}
)


def bins_from_parts(method: str, resolved: Mapping[str, Any]) -> bool:
    """Whether a fit of ``method`` with ``resolved`` params reads the parts into codes.

    XGBoost's exact binning reads every row's values for its edges, so it takes the table.
    """
    if method == "bagging":
        member = resolved.get("estimator")
        return isinstance(member, Mapping) and member.get("method") == "decision_tree"
    if method == "gradient_boosting" and resolved.get("n_iter_no_change") is not None:
        return False
    return method in BINNED_METHODS and resolved.get("tree_method") != "exact"


class _Coded(NamedTuple):
    """A fit's codes from the parts: its mapper, the row groups binned, their codes, and the
    monitoring baseline's feature entries of the float rows the binning read (the training
    rows standing in for all; :func:`service.monitoring.baseline.feature_baseline`)."""

    mapper: BinMapper
    groups: list[Rows]
    codes: list[npt.NDArray[np.unsignedinteger[Any]]]
    described: list[dict[str, Any]]

    def values(self, rows: Rows) -> npt.NDArray[np.float64]:
        """Float rows that the model predicts as it would the rows' own values."""
        for group, codes in zip(self.groups, self.codes, strict=True):
            positions = np.searchsorted(group, rows)
            inside = positions < group.size
            if inside.all() and np.array_equal(group[positions], rows):
                return routing_values(self.mapper, codes[positions], raw=True)
        raise ValueError("rows outside the groups this fit binned")


def _bin_from_parts(
    estimator: Any,
    data: TrainingData,
    parts: PartRows,
    rows: Rows,
    evaluated: Rows | None,
    progress: Progress,
) -> Binned:
    """The training rows as ``Binned``: the plan's rows gathered for the edges, then every
    part binned into preallocated codes (the training rows, and apart the evaluated ones)."""
    progress.note("reading the rows that place the bin edges")
    plan = estimator.binning_plan(int(rows.size), len(data.features))
    sample = parts.values(rows[plan.rows])
    mapper = plan.fit(sample)
    # The sample's floats (30 MiB of 200,000 × 20) go before the codes come: the monitoring
    # baseline needs only their histograms.
    described = feature_baseline(sample, data.features, data.categories)
    del sample
    progress.note("binning the parts")
    groups = [rows] if evaluated is None else [rows, evaluated]
    codes = parts.bin(mapper, groups, feature_major=_reads_feature_major(estimator))
    parts.coded[id(estimator)] = _Coded(mapper, groups, codes, described)
    return Binned(codes[0], mapper)


def _reads_feature_major(estimator: Any) -> bool:
    """Whether the fit's trees read the codes feature-major only (the tree kernels read
    ``engine.tree._memo.feature_major``): binned so, the fit keeps no transposed copy of the
    training codes (30 MiB of 1.6 M × 20)."""
    return isinstance(estimator, (BaseXGBoost, BaseGradientBoosting))


def fits_out_of_core(estimator: Any) -> bool:
    """Whether ``estimator`` fits from the parts on the Dask cluster, out of core: inside
    ``engine.parallel_backend`` (COPPICE_DASK_SCHEDULER) and :func:`can_fit_out_of_core`."""
    return engine.parallel.active_backend() is not None and can_fit_out_of_core(estimator)


def can_fit_out_of_core(estimator: Any) -> bool:
    """Whether ``estimator`` would fit out of core on a cluster: XGBoost-style boosting with
    the settings :meth:`fit_parts` takes (histogram bins, depth-wise trees, …)."""
    return hasattr(estimator, "fit_parts") and not estimator.out_of_core_refusals()


def splits_on_workers(validation: Mapping[str, Any]) -> bool:
    """Whether a run out of core leaves its target, split and metrics on the workers
    (``service.training.out_of_core``): a holdout or none. Folds and successive halving's
    row subsamples assign rows here."""
    return "folds" not in validation and not validation.get("rows")


def table_holding(
    method: str,
    task: Task,
    resolved: Mapping[str, Any],
    cluster: bool,
    validation: Mapping[str, Any],
) -> str:
    """Where a fit of ``method`` holds its table (``service.jobs.estimate.TableHolding``'s
    values), decided before any data is read: ``cluster`` when a Dask scheduler is set
    (``workers`` when the run's ``validation`` leaves its target there too)."""
    if not bins_from_parts(method, resolved):
        return "floats"
    if cluster and can_fit_out_of_core(build_estimator(method, task, resolved)):
        return "workers" if splits_on_workers(validation) else "cluster"
    return "codes"


def _out_of_core(
    method: Method, task: Task, resolved: Mapping[str, Any], spec: TrainingSpec
) -> bool:
    """Whether the run's fits will be out of core (:func:`fits_out_of_core`), before any
    data is read: the estimator as :func:`_fit` builds it (its categorical features aside,
    which no refusal depends on)."""
    if engine.parallel.active_backend() is None:
        return False
    return fits_out_of_core(job_estimator(method, task, resolved, spec, []))


def _fit_out_of_core(
    estimator: Any,
    data: TrainingData,
    parts: PartRows,
    rows: Rows,
    evaluated: Rows | None,
    spec: TrainingSpec,
    progress: Progress,
) -> None:
    """Fit on the Dask workers, each reading its own parts (``engine``'s ``fit_parts``): the
    training rows learn, the others ride along with weight 0. This process then reads what
    the run's metrics need, as a fit from the parts keeps it (:class:`_Coded`): the codes of
    the rows the metrics score (at most ``TRAIN_SCORE_ROWS`` training rows, and ``evaluated``)
    and the values of the rows the edges were placed by (at most the binner's subsample)."""
    table = parts.table
    classification = data.classes is not None
    sources = worker_parts(
        table.store,
        table.parts,
        parts.features,
        spec.target,
        table.kinds,
        table.categories,
        data.classes,
        np.sort(parts.at(rows)),
    )
    scored = np.sort(scored_training_rows(data.y, rows, classification, spec.seed))
    groups = [scored] if evaluated is None else [scored, evaluated]
    keep = engine.parallel.KeptRows([parts.at(group) for group in groups])
    progress.note("reading and binning the parts on the Dask workers")
    estimator.fit_parts(sources, read_worker_part, callbacks=[progress], keep=keep)
    if classification:
        # The workers' targets are indices into the run's classes: back to the labels.
        assert data.classes is not None
        codes = np.asarray(estimator.classes_).astype(np.intp)
        estimator.classes_ = np.asarray(data.classes)[codes]
    assert keep.sample is not None
    described = feature_baseline(keep.sample, data.features, data.categories)
    parts.coded[id(estimator)] = _Coded(estimator.bin_mapper_, groups, keep.codes, described)


def _row_values(data: TrainingData, coded: _Coded | None, rows: Rows) -> RowValues:
    """``rows[start:stop]``'s feature values as the model predicts them: from the columns in
    memory, or decoded from the codes a fit from parts binned."""
    if coded is None:
        return lambda start, stop: data.X[rows[start:stop]]
    return lambda start, stop: coded.values(rows[start:stop])


def _codes_of(data: TrainingData, model: Any) -> _Coded | None:
    if data.parts is None:
        return None
    coded: _Coded | None = data.parts.coded.get(id(model))
    return coded


def _forget_codes(data: TrainingData, model: Any) -> None:
    if data.parts is not None:
        data.parts.coded.pop(id(model), None)
