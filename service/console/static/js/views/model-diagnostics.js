// The model page's plots of its validation rows, from GET /v1/models/{id}/diagnostics (kept at
// training): the ROC curves of a classifier, the residuals of a regressor.

import { get } from "../api.js";
import { rocChart, scatter } from "../charts/lines.js";
import { card, errorBox, h, number, replace } from "../dom.js";

function why(model) {
  if (!model.metrics.validation) {
    return "The model was trained without a holdout (k folds, or every row), so it has no validation rows to plot. Batch predicting a CSV that holds the target (below) plots that file's rows.";
  }
  return model.task === "classification"
    ? "No curve was kept: the model gives no probabilities, has more than 10 classes, or was trained before the server kept curves."
    : "No residuals were kept: the model was trained before the server kept them.";
}

function rocFigure(model, diagnostics) {
  const entries = Object.entries(diagnostics.roc);
  const binary = model.classes.length === 2;
  const curves = entries.map(([label, curve]) => ({
    name: `${binary ? `${label}: ` : `${label} vs rest, `}AUC ${curve.auc === null ? "—" : number(curve.auc, 3)}`,
    fpr: curve.fpr,
    tpr: curve.tpr,
  }));
  const lacking = binary ? [] : model.classes.filter((label) => !Object.hasOwn(diagnostics.roc, label));
  return [
    h("p", { class: "small muted" }, `On the ${number(diagnostics.validation_rows)} validation rows${binary ? `; '${entries[0]?.[0]}' is the positive class` : ", each class against the others"}.`),
    rocChart(curves, { label: "validation ROC curve" }),
    lacking.length ? h("p", { class: "small muted" }, `No curve for ${lacking.join(", ")}: no validation row has that class.`) : null,
  ];
}

function residualFigure(diagnostics) {
  const { predicted, actual } = diagnostics.residuals;
  const pairs = predicted.map((p, i) => [p, actual[i]]).filter(([p, a]) => Number.isFinite(p) && Number.isFinite(a));
  const shown = pairs.length < diagnostics.validation_rows
    ? `${number(pairs.length)} of the ${number(diagnostics.validation_rows)} validation rows, drawn at random`
    : `the ${number(pairs.length)} validation rows`;
  return [
    h("p", { class: "small muted" }, `Actual minus predicted, on ${shown}.`),
    scatter(pairs.map(([p]) => p), pairs.map(([p, a]) => a - p), { xLabel: "predicted", yLabel: "actual − predicted", label: "validation residual plot", zeroLine: true }),
  ];
}

/** The ROC card (classifiers) or the residuals card (regressors), filled once the API answers. */
export async function diagnosticsCard(model, signal) {
  const classification = model.task === "classification";
  const box = h("div", { id: classification ? "roc" : "residuals" }, h("p", { class: "muted" }, "Loading…"));
  const section = card(classification ? "ROC curve (validation rows)" : "Residuals (validation rows)", box);
  try {
    const diagnostics = await get(`/v1/models/${model.id}/diagnostics`, { signal });
    const kept = classification ? diagnostics.roc && Object.keys(diagnostics.roc).length : diagnostics.residuals;
    if (!kept) replace(box, h("p", { class: "muted" }, why(model)));
    else replace(box, classification ? rocFigure(model, diagnostics) : residualFigure(diagnostics));
  } catch (error) {
    if (!signal.aborted) replace(box, errorBox(error));
  }
  return section;
}
