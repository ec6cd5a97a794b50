// Predict one row typed into a form built from the model's features, and explain it: the
// per-feature contributions (exact, or sampled Shapley values: the answer's `explanation`),
// which with the bias add up to the output the method explains (docs/api.md).

import { post } from "../api.js";
import { barChart } from "../charts/bars.js";
import { card, errorBox, field, h, number, replace, select, table } from "../dom.js";

const SHOWN_CONTRIBUTIONS = 20;

function featureInput(feature, index) {
  const props = { id: `predict-${index}`, name: feature.name, "data-feature": feature.name, placeholder: "missing" };
  return feature.kind === "numeric" ? h("input", { ...props, type: "number", step: "any" }) : h("input", { ...props, type: "text" });
}

function record(model, inputs) {
  const row = {};
  model.features.forEach((feature, i) => {
    const text = inputs[i].value.trim();
    // A blank field is a missing value: the key is left out, as the API reads an absent one.
    if (text !== "") row[feature.name] = feature.kind === "numeric" ? Number(text) : text;
  });
  return row;
}

function probabilities(answer) {
  if (!answer.probabilities) return null;
  const rows = answer.classes.map((name, i) => [name, number(answer.probabilities[0][i])]);
  return table(["class", "probability"], rows, { numeric: [1] });
}

/** The contributions of one output: per feature, or per feature and class (multiclass). */
function contributionsOf(answer, classIndex) {
  const row = answer.contributions[0];
  const bias = answer.bias[0];
  if (Array.isArray(row[0])) return { values: row.map((perClass) => perClass[classIndex]), bias: bias[classIndex] };
  return { values: row, bias: Array.isArray(bias) ? bias[0] : bias };
}

/** What produced the contributions, in words. */
function methodOf(answer) {
  return answer.explanation === "sampled" ? "sampled Shapley values" : "exact contributions";
}

function explanation(model, answer) {
  const box = h("div", { id: "predict-shap" });
  const multiclass = Array.isArray(answer.contributions[0][0]);
  const predicted = Math.max(0, answer.classes?.indexOf(String(answer.predictions[0])) ?? 0);
  const classInput = multiclass ? select(answer.classes.map((c, i) => [String(i), c]), { id: "shap-class", "aria-label": "class" }) : null;
  if (classInput) classInput.value = String(predicted);
  const draw = () => {
    const { values, bias } = contributionsOf(answer, Number(classInput?.value ?? 0));
    const items = model.features
      .map((f, i) => ({ label: f.name, value: values[i] }))
      .sort((a, b) => Math.abs(b.value) - Math.abs(a.value))
      .slice(0, SHOWN_CONTRIBUTIONS);
    const total = values.reduce((sum, v) => sum + v, bias);
    replace(box,
      h("p", { class: "small muted" }, `bias ${number(bias)} + contributions = explained output ${number(total)}`),
      barChart(items, { signed: true, label: methodOf(answer), valueLabel: "contribution to the explained output" }));
  };
  classInput?.addEventListener("change", draw);
  draw();
  return h("div", { class: "stack" }, h("h2", {}, `Why: ${methodOf(answer)}`),
    classInput ? h("div", { class: "row" }, h("label", { for: "shap-class" }, "Class"), classInput) : null, box);
}

export function predictCard(model) {
  const inputs = model.features.map(featureInput);
  const result = h("div", { id: "predict-result", "aria-live": "polite" });
  const explainInput = h("input", { type: "checkbox", id: "predict-explain", checked: true });

  async function submit(event) {
    event.preventDefault();
    const button = event.submitter;
    if (button) button.disabled = true;
    replace(result, h("p", { class: "muted" }, "Predicting…"));
    try {
      const answer = await post(`/v1/models/${model.id}/predict`, {
        records: [record(model, inputs)],
        return_proba: model.task === "classification",
        explain: explainInput.checked,
      });
      replace(result,
        h("p", {}, "Prediction: ", h("strong", { id: "predict-value" }, String(answer.predictions[0]))),
        probabilities(answer),
        answer.contributions ? explanation(model, answer) : null);
    } catch (error) {
      replace(result, errorBox(error));
    } finally {
      if (button) button.disabled = false;
    }
  }

  return card("Predict a row",
    h("form", { id: "predict-form", class: "stack", novalidate: true, onsubmit: submit },
      h("div", { class: "fields" }, model.features.map((f, i) => field(`${f.name} (${f.kind})`, inputs[i]))),
      h("div", { class: "row" },
        h("button", { type: "submit", id: "predict-submit" }, "Predict"),
        h("span", { class: "field check" }, explainInput, h("label", { for: "predict-explain" }, "explain")))),
    result);
}
