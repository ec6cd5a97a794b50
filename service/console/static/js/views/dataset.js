// One dataset: its facts and its columns (kind, missing, distinct, distribution).

import { del, get, isAdmin } from "../api.js";
import { miniBars } from "../charts/bars.js";
import { tickText } from "../charts/svg.js";
import { bytes, card, errorBox, facts, h, number, replace, table, when } from "../dom.js";
import { distributionOf } from "./profiles.js";

function distribution(datasetId, column) {
  const stats = distributionOf(datasetId, column);
  if (stats?.histogram) {
    const { counts, edges } = stats.histogram;
    const labels = counts.map((_, i) => `${tickText(edges[i])} – ${tickText(edges[i + 1])}`);
    return h("div", {}, miniBars(counts, labels), h("span", { class: "small muted" }, `${tickText(edges[0])} … ${tickText(edges[edges.length - 1])}`));
  }
  if (stats?.top?.length) {
    const top = stats.top;
    return h("div", {}, miniBars(top.map((t) => t.count), top.map((t) => t.value)),
      h("span", { class: "small muted" }, top.slice(0, 3).map((t) => t.value).join(", ")));
  }
  if (column.stats && column.stats.min !== undefined) {
    return h("span", { class: "small muted" }, `${number(column.stats.min)} … ${number(column.stats.max)}, mean ${number(column.stats.mean)}`);
  }
  return h("span", { class: "small muted" }, "—");
}

export async function render(root, { params: [id] }, signal) {
  const dataset = await get(`/v1/datasets/${encodeURIComponent(id)}`, { signal });
  const rows = dataset.columns.map((column) => [
    h("span", { class: "mono" }, column.name),
    column.kind,
    number(column.n_missing),
    number(column.n_unique),
    distribution(dataset.id, column),
  ]);
  const message = h("div");
  const actions = h("div", { class: "row" });
  if (isAdmin()) {
    actions.append(
      h("a", { class: "button", href: `#/train?dataset=${dataset.id}` }, "Train a model on it"),
      h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(`Delete dataset ${dataset.name}?`)) return;
        try {
          await del(`/v1/datasets/${dataset.id}`);
          location.hash = "#/datasets";
        } catch (error) {
          replace(message, errorBox(error));
        }
      } }, "Delete"),
    );
  }
  replace(
    root,
    h("h1", {}, dataset.name),
    card(null,
      facts([
        ["rows", number(dataset.n_rows)],
        ["columns", number(dataset.n_columns)],
        ["size", bytes(dataset.size_bytes)],
        ["uploaded", when(dataset.created_at)],
        ["id", h("span", { class: "mono small" }, dataset.id)],
        ["sha256", h("span", { class: "mono small" }, dataset.sha256)],
      ]),
      actions, message),
    card("Columns", h("div", { id: "columns" }, table(["column", "kind", "missing", "distinct", "distribution"], rows, { numeric: [2, 3] }))),
  );
}
