// Train: a dataset, a target, a method and its parameters (the form comes from the method's
// JSON Schema), the validation scheme; POST /v1/jobs, then off to the job's live page.

import { ApiError, get, isAdmin, post } from "../api.js";
import { card, errorBox, field, h, replace, select, setFieldError } from "../dom.js";
import { paramsForm } from "../schema-form.js";

function taskFor(column) {
  return column?.kind === "numeric" ? "regression" : "classification";
}

export async function render(root, { query }, signal) {
  if (!isAdmin()) {
    replace(root, h("h1", {}, "Train"), errorBox("Training needs an admin key."));
    return;
  }
  const [datasets, methods] = await Promise.all([
    get("/v1/datasets?limit=200", { signal }),
    get("/v1/methods", { signal }),
  ]);
  if (!datasets.items.length) {
    replace(root, h("h1", {}, "Train"), card(null, h("p", {}, "Upload a dataset first: ", h("a", { href: "#/datasets" }, "Datasets"))));
    return;
  }
  const chosen = query.get("dataset") || datasets.items[0].id;
  const datasetInput = select(datasets.items.map((d) => [d.id, d.name]), { id: "train-dataset", name: "dataset" });
  datasetInput.value = chosen;
  const targetInput = select([], { id: "train-target", name: "target" });
  const taskInput = select([["", "from the target's kind"], "classification", "regression"], { id: "train-task", name: "task" });
  const methodInput = select([], { id: "train-method", name: "method" });
  const methodHelp = h("p", { class: "small muted" });
  const validationInput = select([["holdout", "holdout"], ["folds", "k-fold cross-validation"], ["none", "none"]], { id: "train-validation", name: "validation" });
  const holdoutInput = h("input", { type: "number", id: "train-holdout", name: "holdout", value: "0.2", min: 0.01, max: 0.99, step: "any" });
  const foldsInput = h("input", { type: "number", id: "train-folds", name: "folds", value: "5", min: 2, step: 1 });
  const seedInput = h("input", { type: "number", id: "train-seed", name: "seed", step: 1, placeholder: "random" });
  const nameInput = h("input", { type: "text", id: "train-name", name: "name", placeholder: "optional" });
  const fields = {
    dataset_id: field("Dataset", datasetInput),
    target: field("Target column", targetInput),
    task: field("Task", taskInput),
    method: field("Method", methodInput),
    validation: field("Validation", validationInput),
    holdout: field("Holdout fraction", holdoutInput, "Rows kept apart to score the model (stratified for classification)."),
    folds: field("Folds", foldsInput, "k-fold metrics, then a final fit on every row."),
    seed: field("Seed", seedInput),
    name: field("Name", nameInput),
  };
  const featuresBox = h("div", { class: "row", id: "train-features" });
  const paramsBox = h("div");
  const message = h("div");
  let dataset = null;
  let form = null;

  const task = () => taskInput.value || taskFor(dataset?.columns.find((c) => c.name === targetInput.value));

  // Every column but the target, all ticked: the API's default when `features` is left out.
  function showFeatures() {
    replace(featuresBox, dataset.columns.filter((c) => c.name !== targetInput.value).map((c) =>
      h("label", { class: "field check" }, h("input", { type: "checkbox", value: c.name, checked: true }), c.name)));
  }

  function showMethods() {
    const previous = methodInput.value;
    const usable = methods.items.filter((m) => m.tasks.includes(task()));
    replace(methodInput, usable.map((m) => h("option", { value: m.name }, m.name)));
    methodInput.value = usable.some((m) => m.name === previous) ? previous : usable.some((m) => m.name === "random_forest") ? "random_forest" : usable[0]?.name;
    showParams();
  }

  function showParams() {
    const method = methods.items.find((m) => m.name === methodInput.value);
    methodHelp.textContent = method?.description || "";
    form = method ? paramsForm(method.params_schema, task()) : null;
    replace(paramsBox, form ? form.element : null);
  }

  function showValidation() {
    fields.holdout.classList.toggle("hidden", validationInput.value !== "holdout");
    fields.folds.classList.toggle("hidden", validationInput.value !== "folds");
  }

  async function loadDataset() {
    dataset = await get(`/v1/datasets/${encodeURIComponent(datasetInput.value)}`, { signal });
    replace(targetInput, dataset.columns.map((c) => h("option", { value: c.name }, `${c.name} (${c.kind})`)));
    targetInput.value = dataset.columns[dataset.columns.length - 1].name;
    showFeatures();
    showMethods();
  }

  function body() {
    const validation = { holdout: { holdout: Number(holdoutInput.value) }, folds: { folds: Number(foldsInput.value) }, none: { holdout: 0 } }[validationInput.value];
    const request = { dataset_id: datasetInput.value, target: targetInput.value, method: methodInput.value, validation };
    const boxes = [...featuresBox.querySelectorAll("input")];
    if (boxes.some((box) => !box.checked)) request.features = boxes.filter((box) => box.checked).map((box) => box.value);
    if (taskInput.value) request.task = taskInput.value;
    if (seedInput.value !== "") request.seed = Number(seedInput.value);
    if (nameInput.value.trim()) request.name = nameInput.value.trim();
    return request;
  }

  async function submit(event) {
    event.preventDefault();
    replace(message);
    Object.values(fields).forEach((wrapper) => setFieldError(wrapper, ""));
    const { params, valid } = form ? form.read() : { params: {}, valid: true };
    if (!valid) {
      replace(message, errorBox("Some parameters are out of bounds; see the marked fields."));
      return;
    }
    const button = event.submitter;
    if (button) button.disabled = true;
    try {
      const job = await post("/v1/jobs", { ...body(), params });
      location.hash = `#/jobs/${job.id}`;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const rest = (form ? form.showErrors(error.errors) : error.errors).filter((e) => {
        const name = ["holdout", "folds", "target", "dataset_id", "method", "task", "seed", "name"].find((n) => e.loc.includes(n));
        // Field errors with no field of their own (features, say) stay in the message below.
        if (name) setFieldError(fields[name] || fields.validation, e.msg);
        return !name;
      });
      replace(message, errorBox(rest.length || !error.errors.length ? error : "The server refused some values; see the marked fields."));
    } finally {
      if (button) button.disabled = false;
    }
  }

  datasetInput.addEventListener("change", () => loadDataset().catch((e) => replace(message, errorBox(e))));
  targetInput.addEventListener("change", () => {
    showFeatures();
    showMethods();
  });
  taskInput.addEventListener("change", showMethods);
  methodInput.addEventListener("change", showParams);
  validationInput.addEventListener("change", showValidation);
  await loadDataset();
  showValidation();

  replace(
    root,
    h("h1", {}, "Train a model"),
    h("form", { id: "train-form", novalidate: true, onsubmit: submit },
      card("What to learn", h("div", { class: "fields" }, fields.dataset_id, fields.target, fields.task, fields.method), methodHelp,
        h("p", { class: "small muted" }, "Features"), featuresBox),
      card("Parameters", paramsBox),
      card("Validation", h("div", { class: "fields" }, fields.validation, fields.holdout, fields.folds, fields.seed, fields.name)),
      h("div", { class: "row" }, h("button", { type: "submit", id: "train-submit" }, "Train")),
      message),
  );
}
