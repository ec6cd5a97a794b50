// A new search: dataset, target, task, the candidates (methods and their parameter spaces as
// JSON, or "auto"), strategy, budget, folds, metric, stacking and registration; POST
// /v1/searches, then off to the search's live page. Every 422 is shown beside its field.

import { ApiError, get, isAdmin, post } from "../api.js";
import { card, errorBox, field, h, replace, select, setFieldError } from "../dom.js";

const METRICS = {
  classification: ["roc_auc", "accuracy", "log_loss", "f1_macro"],
  regression: ["rmse", "mae", "r2"],
};
const EXAMPLE = [
  { method: "random_forest", params: { max_features: ["sqrt", 0.5], min_samples_leaf: [1, 5] } },
];
// Body fields with a form field of their own, by the name errors[].loc uses.
const NAMES = ["candidates", "dataset_id", "target", "task", "strategy", "max_models", "max_seconds", "folds", "metric", "register_as", "seed", "name", "auto"];

/** Where in the candidates an error is: "candidates[0].params.max_depth: …". */
function candidateMessage(error) {
  const at = error.loc.slice(error.loc.indexOf("candidates") + 1);
  const path = at.map((part) => (typeof part === "number" ? `[${part}]` : `.${part}`)).join("");
  return path ? `candidates${path}: ${error.msg}` : error.msg;
}

export async function render(root, { query }, signal) {
  if (!isAdmin()) {
    replace(root, h("h1", {}, "New search"), errorBox("Starting a search needs an admin key."));
    return;
  }
  const datasets = await get("/v1/datasets?limit=200", { signal });
  if (!datasets.items.length) {
    replace(root, h("h1", {}, "New search"), card(null, h("p", {}, "Upload a dataset first: ", h("a", { href: "#/datasets" }, "Datasets"))));
    return;
  }
  const input = (props) => h("input", { ...props, name: props.id.replace(/^search-/, "") });
  const controls = {
    dataset_id: select(datasets.items.map((d) => [d.id, d.name]), { id: "search-dataset", name: "dataset" }),
    target: select([], { id: "search-target", name: "target" }),
    task: select([["", "from the target's kind"], "classification", "regression"], { id: "search-task", name: "task" }),
    auto: input({ type: "checkbox", id: "search-auto" }),
    strategy: select([["grid", "grid: every combination"], ["random", "random draws"], ["halving", "successive halving"]], { id: "search-strategy", name: "strategy" }),
    candidates: h("textarea", { id: "search-candidates", name: "candidates", rows: 8, spellcheck: "false" }),
    max_models: input({ type: "number", id: "search-max-models", min: 1, max: 500, step: 1, placeholder: "strategy's default" }),
    max_seconds: input({ type: "number", id: "search-max-seconds", min: 1, step: "any", placeholder: "none" }),
    folds: input({ type: "number", id: "search-folds", min: 2, max: 20, step: 1, value: "5" }),
    metric: select([], { id: "search-metric", name: "metric" }),
    stack: input({ type: "checkbox", id: "search-stack" }),
    register_as: input({ type: "text", id: "search-register-as", placeholder: "optional registered name" }),
    seed: input({ type: "number", id: "search-seed", step: 1, placeholder: "random" }),
    name: input({ type: "text", id: "search-name", placeholder: "optional" }),
  };
  controls.dataset_id.value = query.get("dataset") || datasets.items[0].id;
  controls.strategy.value = "random";
  // One candidate a line: readable, and short enough to edit at phone width.
  controls.candidates.value = `[\n${EXAMPLE.map((c) => `  ${JSON.stringify(c)}`).join(",\n")}\n]`;
  const fields = {
    dataset_id: field("Dataset", controls.dataset_id),
    target: field("Target column", controls.target),
    task: field("Task", controls.task),
    strategy: field("Strategy", controls.strategy, "A grid takes lists only; random and halving also draw from ranges."),
    auto: h("label", { class: "field check" }, controls.auto, "auto: let the service choose methods and ranges"),
    candidates: field("Candidates (JSON)", controls.candidates,
      "A list of {\"method\", \"params\"}; each parameter a list (choose one), {\"int\": [lo, hi]}, {\"uniform\": [lo, hi]}, {\"log_uniform\": [lo, hi]}, or a fixed value."),
    max_models: field("Max models", controls.max_models),
    max_seconds: field("Max seconds", controls.max_seconds, "Then what is left is cancelled and what finished kept."),
    folds: field("Folds", controls.folds, "k-fold CV on the same folds for every candidate."),
    metric: field("Metric", controls.metric),
    stack: h("label", { class: "field check" }, controls.stack, "stack the best of each method"),
    register_as: field("Register the best as", controls.register_as, "Its next version, with alias candidate; made if new."),
    seed: field("Seed", controls.seed),
    name: field("Name", controls.name),
  };
  const message = h("div");
  let dataset = null;

  const task = () => controls.task.value || (dataset?.columns.find((c) => c.name === controls.target.value)?.kind === "numeric" ? "regression" : "classification");

  function showMetrics() {
    const metrics = METRICS[task()];
    replace(controls.metric, h("option", { value: "" }, `default (${metrics[0]})`), metrics.map((m) => h("option", { value: m }, m)));
  }

  async function loadDataset() {
    dataset = await get(`/v1/datasets/${encodeURIComponent(controls.dataset_id.value)}`, { signal });
    const previous = controls.target.value;
    replace(controls.target, dataset.columns.map((c) => h("option", { value: c.name }, `${c.name} (${c.kind})`)));
    // The same target when the new dataset has it, else its last column.
    controls.target.value = dataset.columns.some((c) => c.name === previous) ? previous : dataset.columns[dataset.columns.length - 1].name;
    showMetrics();
  }

  function showAuto() {
    fields.candidates.classList.toggle("hidden", controls.auto.checked);
  }

  function body() {
    const request = { dataset_id: controls.dataset_id.value, target: controls.target.value, strategy: controls.strategy.value };
    if (controls.task.value) request.task = controls.task.value;
    if (controls.auto.checked) request.auto = true;
    else request.candidates = JSON.parse(controls.candidates.value);
    const budget = {};
    if (controls.max_models.value !== "") budget.max_models = Number(controls.max_models.value);
    if (controls.max_seconds.value !== "") budget.max_seconds = Number(controls.max_seconds.value);
    if (Object.keys(budget).length) request.budget = budget;
    request.validation = { folds: Number(controls.folds.value) };
    if (controls.metric.value) request.metric = controls.metric.value;
    if (controls.stack.checked) request.stack = true;
    for (const name of ["register_as", "name"]) if (controls[name].value.trim()) request[name] = controls[name].value.trim();
    if (controls.seed.value !== "") request.seed = Number(controls.seed.value);
    return request;
  }

  async function submit(event) {
    event.preventDefault();
    replace(message);
    Object.values(fields).forEach((wrapper) => wrapper.querySelector(".field-error") && setFieldError(wrapper, ""));
    let request;
    try {
      request = body();
    } catch (error) {
      setFieldError(fields.candidates, `Not JSON: ${error.message}`);
      return;
    }
    if (!request.auto && !Array.isArray(request.candidates)) {
      setFieldError(fields.candidates, "A list of candidates: [{\"method\": …, \"params\": {…}}].");
      return;
    }
    const button = event.submitter;
    if (button) button.disabled = true;
    try {
      const search = await post("/v1/searches", request);
      location.hash = `#/searches/${search.id}`;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const rest = error.errors.filter((e) => {
        const name = NAMES.find((n) => e.loc?.includes(n));
        if (name === "candidates") setFieldError(fields.candidates, candidateMessage(e));
        else if (name && fields[name].querySelector(".field-error")) setFieldError(fields[name], e.msg);
        else return true;
        return false;
      });
      replace(message, errorBox(rest.length || !error.errors.length ? error : "The server refused some values; see the marked fields."));
    } finally {
      if (button) button.disabled = false;
    }
  }

  controls.dataset_id.addEventListener("change", () => loadDataset().catch((e) => replace(message, errorBox(e))));
  controls.target.addEventListener("change", showMetrics);
  controls.task.addEventListener("change", showMetrics);
  controls.auto.addEventListener("change", showAuto);
  await loadDataset();

  replace(
    root,
    h("p", { class: "small" }, h("a", { href: "#/searches" }, "← Searches")),
    h("h1", {}, "New search"),
    h("form", { id: "search-form", novalidate: true, onsubmit: submit },
      card("What to learn", h("div", { class: "fields" }, fields.dataset_id, fields.target, fields.task)),
      card("Candidates", h("div", { class: "fields" }, fields.strategy, fields.auto), fields.candidates),
      card("Budget and scoring", h("div", { class: "fields" }, fields.max_models, fields.max_seconds, fields.folds, fields.metric, fields.seed),
        fields.stack),
      card("Afterwards", h("div", { class: "fields" }, fields.register_as, fields.name)),
      h("div", { class: "row" }, h("button", { type: "submit", id: "search-submit" }, "Start the search")),
      message),
  );
}
