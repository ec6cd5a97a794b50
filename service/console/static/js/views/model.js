// One model: what it is, its metrics, learning curves, confusion matrix, importances, and
// (from model-diagnostics.js, model-monitoring.js, model-predict.js, model-batch.js and
// model-batch-jobs.js) its validation ROC curves or residuals, live drift and performance,
// predictions, explanations, batch scoring of a CSV and of a stored dataset.

import { ApiError, del, get, getFile, isAdmin } from "../api.js";
import { barChart, confusionMatrix } from "../charts/bars.js";
import { lineChart } from "../charts/lines.js";
import { bytes, card, download, errorBox, facts, h, number, replace, select, shortId, table, when } from "../dom.js";
import { batchCard } from "./model-batch.js";
import { batchJobsCard } from "./model-batch-jobs.js";
import { diagnosticsCard } from "./model-diagnostics.js";
import { monitoringCard } from "./model-monitoring.js";
import { predictCard } from "./model-predict.js";
import { registerCard } from "./registry.js";

const SETS = ["train", "validation", "oob"];

function metricsTable(metrics) {
  const names = new Set();
  for (const set of [...SETS, "cv"]) for (const name of Object.keys(metrics[set] || {})) names.add(name);
  names.delete("confusion_matrix");
  const columns = [...SETS, "cv"].filter((set) => metrics[set] && Object.keys(metrics[set]).length);
  if (!columns.length) return h("p", { class: "muted" }, "No metrics were recorded.");
  const cell = (set, name) => {
    const value = metrics[set]?.[name];
    if (set === "cv" && value) return `${number(value.mean)} ± ${number(value.std, 2)}`;
    return number(value);
  };
  const rows = [...names].sort().map((name) => [name, ...columns.map((set) => cell(set, name))]);
  return table(["metric", ...columns], rows, { numeric: columns.map((_, i) => i + 1) });
}

async function curvesCard(model, signal) {
  const box = h("div", { id: "curves" }, h("p", { class: "muted" }, "Loading…"));
  const section = card("Learning curves", box);
  try {
    const curves = await get(`/v1/models/${model.id}/curves`, { signal });
    const series = SETS.filter((set) => curves[set]?.length).map((set) => ({ name: set, xs: curves.iterations, ys: curves[set] }));
    replace(box, series.length
      ? lineChart(series, { xLabel: "iteration", yLabel: curves.metric || "score", label: "learning curves" })
      : h("p", { class: "muted" }, "This model recorded no per-iteration scores."));
  } catch (error) {
    replace(box, error instanceof ApiError && error.status === 404 ? h("p", { class: "muted" }, "This method has no learning curves.") : errorBox(error));
  }
  return section;
}

function confusionCard(model) {
  const set = ["validation", "oob", "train"].find((name) => model.metrics[name]?.confusion_matrix);
  if (!set || !model.classes) return null;
  return card(`Confusion matrix (${set} rows)`,
    h("div", { id: "confusion", class: "matrix" }, confusionMatrix(model.classes, model.metrics[set].confusion_matrix)));
}

function importanceCard(model, signal) {
  // The kinds the model has, as GET /v1/models/{id} lists them (null: the API could not tell,
  // its artifact being unreadable; the default kind's request then shows why).
  const kinds = model.importance_kinds;
  if (kinds && !kinds.length) return card("Feature importance", h("p", { id: "importance-none", class: "muted" }, "This model has no feature importances."));
  const chart = h("div", { id: "importance-chart" }, h("p", { class: "muted" }, "Loading…"));
  const kindInput = select(kinds || [], { id: "importance-kind", name: "kind", "aria-label": "importance kind" });
  const note = h("p", { class: "field-error" });

  async function load(kind) {
    replace(note);
    replace(chart, h("p", { class: "muted" }, "Computing…"));
    try {
      const answer = await get(`/v1/models/${model.id}/feature-importance${kind ? `?kind=${kind}` : ""}`, { signal });
      kindInput.value = answer.kind;
      const items = answer.features.slice(0, 30).map((f) => ({ label: f.name, value: f.importance ?? 0, std: f.std }));
      replace(chart, barChart(items, { label: `${answer.kind} importance`, valueLabel: `${answer.kind} importance` }),
        answer.features.length > 30 ? h("p", { class: "small muted" }, `The 30 most important of ${answer.features.length} features.`) : null);
    } catch (error) {
      if (signal.aborted) return;
      replace(chart);
      replace(note, error.message);
    }
  }

  kindInput.addEventListener("change", () => load(kindInput.value));
  load(null);
  return card("Feature importance",
    kinds ? h("div", { class: "row" }, h("label", { for: "importance-kind" }, "Kind"), kindInput) : null, note, chart);
}

function overview(model) {
  const message = h("div");
  const remove = isAdmin()
    ? h("button", { type: "button", class: "danger", onclick: async () => {
      if (!confirm("Delete this model?")) return;
      try {
        await del(`/v1/models/${model.id}`);
        location.hash = "#/models";
      } catch (error) {
        replace(message, errorBox(error));
      }
    } }, "Delete")
    : null;
  return card(null,
    facts([
      ["method", model.method],
      ["task", model.task],
      ["target", h("span", { class: "mono" }, model.target)],
      ["classes", model.classes ? model.classes.join(", ") : undefined],
      ["features", model.features.length],
      ["estimators", model.n_estimators ?? undefined],
      ["size", bytes(model.size_bytes)],
      ["created", when(model.created_at)],
      ["job", h("a", { href: `#/jobs/${model.job_id}` }, shortId(model.job_id))],
      ["dataset", model.dataset_id ? h("a", { href: `#/datasets/${model.dataset_id}` }, shortId(model.dataset_id)) : "deleted"],
      ["id", h("span", { class: "mono small" }, model.id)],
    ]),
    h("details", {}, h("summary", {}, "Parameters"), h("pre", { class: "mono small scroll" }, JSON.stringify(model.params, null, 2))),
    h("div", { class: "row" }, exportButton(model, "onnx", message), exportButton(model, "triton", message), remove),
    message);
}

// The model as an ONNX file or a Triton model repository (docs/export.md): the same answers
// as predict, outside Coppice. A method that does not export answers 422 naming those that do.
function exportButton(model, format, message) {
  const [label, suffix] = format === "onnx" ? ["Export ONNX", "onnx"] : ["Export for Triton", "zip"];
  return h("button", { type: "button", id: `export-${format}`, onclick: async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    replace(message);
    try {
      const file = await getFile(`/v1/models/${encodeURIComponent(model.id)}/export?format=${format}`);
      download(`coppice-${model.id}.${suffix}`, file, file.type || "application/octet-stream");
    } catch (error) {
      replace(message, errorBox(error));
    } finally {
      button.disabled = false;
    }
  } }, label);
}

export async function render(root, { params: [id] }, signal) {
  const model = await get(`/v1/models/${encodeURIComponent(id)}`, { signal });
  const curves = h("div");
  const diagnostics = h("div");
  replace(
    root,
    h("h1", {}, model.name || `Model ${shortId(model.id)}`),
    h("div", { class: "grid" }, overview(model), card("Metrics", h("div", { id: "metrics" }, metricsTable(model.metrics)))),
    curves,
    confusionCard(model),
    diagnostics,
    importanceCard(model, signal),
    monitoringCard(model, signal),
    predictCard(model),
    batchCard(model),
    batchJobsCard(model, signal),
    registerCard(model),
  );
  // Both fetched at once; each card takes its place when its answer comes.
  await Promise.all([
    curvesCard(model, signal).then((section) => replace(curves, section)),
    diagnosticsCard(model, signal).then((section) => replace(diagnostics, section)),
  ]);
}
