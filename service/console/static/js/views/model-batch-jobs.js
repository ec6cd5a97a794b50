// Batch predictions of a stored dataset (POST /v1/batch-predictions): the server scores the
// dataset part by part as a job and writes a new dataset. The card starts one (admin keys) and
// lists this model's, following the running ones with long polls until they end.

import { get, isAdmin, post } from "../api.js";
import { card, errorBox, field, h, progressBar, replace, select, setProgress, shortId, status, when } from "../dom.js";
import { follow } from "../follow.js";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);
const WAIT_SECONDS = 1;

function batchRow(batch, signal) {
  const bar = progressBar("batch progress");
  const badge = h("span", { class: "batch-status" });
  const detail = h("span", { class: "small muted" });
  const output = h("span");
  const row = h("div", { class: "stack batch-item", id: `batch-${batch.id}` },
    h("div", { class: "row" }, badge, h("span", { class: "mono" }, batch.name || shortId(batch.id)), when(batch.created_at), detail, output), bar);

  function show(current) {
    batch = current;
    replace(badge, status(batch.status));
    setProgress(bar, batch.status === "succeeded" ? 1 : batch.progress);
    bar.classList.toggle("hidden", ENDED.has(batch.status));
    detail.textContent = batch.status === "failed" && batch.error
      ? `${batch.error.code}: ${batch.error.message}`
      : `${batch.n_rows} rows${batch.stage && !ENDED.has(batch.status) ? ` · ${batch.stage}` : ""}`;
    const accuracy = batch.metrics?.accuracy ?? batch.metrics?.rmse;
    replace(output, batch.output_dataset_id
      ? h("a", { href: `#/datasets/${batch.output_dataset_id}`, class: "batch-output" }, "output dataset",
        accuracy != null ? ` (${batch.metrics.accuracy != null ? "accuracy" : "rmse"} ${accuracy.toFixed(4)})` : "")
      : "");
    row.title = (batch.notes || []).join("\n");
  }

  show(batch);
  const path = `/v1/batch-predictions/${encodeURIComponent(batch.id)}`;
  follow({ read: () => get(`${path}?wait=${WAIT_SECONDS}`, { signal }), show, ended: () => ENDED.has(batch.status), message: h("div"), signal });
  return row;
}

export function batchJobsCard(model, signal) {
  const list = h("div", { id: "batch-jobs", class: "stack" });
  const message = h("div", { id: "batch-jobs-message" });
  const datasets = select([], { id: "batch-dataset" });
  const keep = h("input", { type: "text", id: "batch-keep", placeholder: "customer_id, …" });
  const proba = h("input", { type: "checkbox", id: "batch-proba", checked: model.task === "classification" });
  const explain = h("input", { type: "checkbox", id: "batch-explain" });

  async function load() {
    try {
      const [page, found] = await Promise.all([
        get(`/v1/batch-predictions?model_id=${encodeURIComponent(model.id)}&limit=20`, { signal }),
        get("/v1/datasets?limit=100", { signal }),
      ]);
      replace(datasets, ...found.items.map((d) => h("option", { value: d.id }, `${d.name} (${d.n_rows} rows, ${shortId(d.id)})`)));
      replace(list, ...(page.items.length
        ? page.items.map((batch) => batchRow(batch, signal))
        : [h("p", { class: "small muted", id: "batch-jobs-none" }, "No batch predictions of this model yet.")]));
    } catch (error) {
      if (!signal.aborted) replace(message, errorBox(error));
    }
  }

  async function submit(event) {
    event.preventDefault();
    replace(message);
    const keepColumns = keep.value.split(",").map((name) => name.trim()).filter(Boolean);
    try {
      const batch = await post("/v1/batch-predictions", {
        model: model.id,
        dataset_id: datasets.value,
        keep_columns: keepColumns,
        return_proba: proba.checked,
        explain: explain.checked,
      });
      document.getElementById("batch-jobs-none")?.remove();
      list.prepend(batchRow(batch, signal));
    } catch (error) {
      replace(message, errorBox(error));
    }
  }

  const form = isAdmin()
    ? h("form", { id: "batch-jobs-form", class: "stack", onsubmit: submit },
      h("div", { class: "row" },
        field("Dataset", datasets),
        field("Keep columns", keep, "copied into the output as they are"),
        h("label", {}, proba, " probabilities"),
        h("label", {}, explain, " contributions"),
        h("button", { type: "submit", id: "batch-jobs-submit" }, "Score on the server")))
    : null;
  load();
  return card("Batch predictions of a stored dataset",
    h("p", { class: "small muted" }, "Scored by a worker part by part; the output is a new dataset (the kept columns, prediction, probabilities and contributions)."),
    form, message, list);
}
