// Batch predictions of a CSV file: the rows go to /predict in chunks, and the predictions
// come back as a CSV download. When the file holds the target column too, the page also draws
// how the model does on it: the ROC curve (classifiers) or the residuals (regressors), on the
// file's rows (the page's plots above are of the training holdout).

import { post } from "../api.js";
import { rocChart, rocCurve, scatter } from "../charts/lines.js";
import { card, download, errorBox, field, h, number, progressBar, replace, setProgress } from "../dom.js";
import { numericCell, parseCsv, toCsv } from "../csv.js";

const CHUNK_ROWS = 5000;
const MAX_ROC_CLASSES = 8;

async function predictAll(model, header, rows, onProgress) {
  const kinds = new Map(model.features.map((f) => [f.name, f.kind]));
  const used = header.map((name, i) => [name, i]).filter(([name]) => kinds.has(name));
  const columns = used.map(([name]) => name);
  const answer = { predictions: [], probabilities: [] };
  for (let start = 0; start < rows.length; start += CHUNK_ROWS) {
    const chunk = rows.slice(start, start + CHUNK_ROWS).map((row) => used.map(([name, i]) => {
      const text = row[i] ?? "";
      if (kinds.get(name) === "numeric") return numericCell(text);
      return text.trim() === "" ? null : text;
    }));
    const part = await post(`/v1/models/${model.id}/predict`, { columns, rows: chunk, return_proba: model.task === "classification" });
    answer.predictions.push(...part.predictions);
    if (part.probabilities) answer.probabilities.push(...part.probabilities);
    answer.classes = part.classes;
    onProgress(Math.min(rows.length, start + CHUNK_ROWS) / rows.length);
  }
  const missing = model.features.filter((f) => !columns.includes(f.name)).map((f) => f.name);
  return { ...answer, missing };
}

function fileRocChart(model, truth, probabilities) {
  const classes = model.classes;
  const binary = classes.length === 2;
  const shown = binary ? [1] : classes.map((_, i) => i).slice(0, MAX_ROC_CLASSES);
  const curves = shown.map((k) => {
    const { fpr, tpr, auc } = rocCurve(probabilities.map((p) => p[k]), truth.map((t) => t === classes[k]));
    const name = `${binary ? "" : `${classes[k]} vs rest, `}AUC ${auc === null ? "—" : number(auc, 3)}`;
    return { name, fpr, tpr };
  });
  return rocChart(curves);
}

function evaluation(model, header, rows, answer) {
  const targetIndex = header.indexOf(model.target);
  if (targetIndex < 0) return h("p", { class: "small muted" }, `Add the target column '${model.target}' to the file to see how the model does on it.`);
  if (model.task === "classification") {
    const labelled = rows.map((row, i) => [row[targetIndex]?.trim(), i]).filter(([truth]) => truth);
    const truth = labelled.map(([t]) => t);
    const probabilities = labelled.map(([, i]) => answer.probabilities[i]);
    const right = labelled.filter(([t, i]) => String(answer.predictions[i]) === t).length;
    return h("div", { id: "batch-evaluation", class: "stack" },
      h("h2", {}, "ROC curve on this file"),
      h("p", { class: "small muted" }, `accuracy ${number(right / Math.max(1, labelled.length))} on ${labelled.length} labelled rows`),
      fileRocChart(model, truth, probabilities));
  }
  const points = rows.map((row, i) => [numericCell(row[targetIndex] ?? ""), answer.predictions[i]])
    .filter(([truth, predicted]) => typeof truth === "number" && typeof predicted === "number");
  const predicted = points.map(([, p]) => p);
  const residuals = points.map(([truth, p]) => truth - p);
  const rmse = Math.sqrt(residuals.reduce((sum, r) => sum + r * r, 0) / Math.max(1, residuals.length));
  return h("div", { id: "batch-evaluation", class: "stack" },
    h("h2", {}, "Residuals on this file"),
    h("p", { class: "small muted" }, `RMSE ${number(rmse)} on ${points.length} labelled rows`),
    scatter(predicted, residuals, { xLabel: "predicted", yLabel: "actual − predicted", label: "residual plot", zeroLine: true }));
}

export function batchCard(model) {
  const file = h("input", { type: "file", id: "batch-file", accept: ".csv,text/csv" });
  const bar = progressBar("batch prediction progress");
  const progress = h("div", { class: "hidden" }, bar);
  const result = h("div", { id: "batch-result" });

  async function submit(event) {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) return;
    replace(result);
    progress.classList.remove("hidden");
    setProgress(bar, 0);
    try {
      const [header, ...rows] = parseCsv(await chosen.text());
      if (!header || !rows.length) throw new Error("The file has no rows under its header.");
      const answer = await predictAll(model, header, rows, (fraction) => setProgress(bar, fraction));
      const probabilityColumns = answer.probabilities.length ? answer.classes.map((c) => `probability_${c}`) : [];
      const out = rows.map((row, i) => [...row, answer.predictions[i], ...(answer.probabilities[i] || [])]);
      const name = `${chosen.name.replace(/\.csv$/i, "")}-predictions.csv`;
      download(name, toCsv([...header, "prediction", ...probabilityColumns], out));
      replace(result,
        h("p", { id: "batch-done" }, `${number(rows.length)} predictions downloaded as ${name}.`),
        answer.missing.length ? h("p", { class: "small muted" }, `Not in the file, so predicted as missing: ${answer.missing.join(", ")}.`) : null,
        evaluation(model, header, rows, answer));
    } catch (error) {
      replace(result, errorBox(error));
    } finally {
      progress.classList.add("hidden");
    }
  }

  return card("Batch predict a CSV",
    h("form", { id: "batch-form", class: "stack", onsubmit: submit },
      h("p", { class: "small muted" }, "Columns named like the model's features are used; others (the target, ids) are kept in the download but not sent."),
      h("div", { class: "row" }, field("CSV file", file), h("button", { type: "submit", id: "batch-submit" }, "Predict and download"))),
    progress, result);
}
