// One dataset: its facts and its columns (kind, missing, distinct, distribution). The
// distributions are the API's (`distribution` of each column in GET /v1/datasets/{id}), so
// every dataset shows them, however it was uploaded; null means the server did not compute one
// (a dataset uploaded before it did).

import { del, get, getFile, isAdmin } from "../api.js";
import { miniBars } from "../charts/bars.js";
import { tickText } from "../charts/svg.js";
import { bytes, card, download, errorBox, facts, h, number, replace, table, when } from "../dom.js";

const note = (text) => h("span", { class: "small muted" }, text);

function histogram({ histogram: { counts, edges }, mean }) {
  if (!counts.length) return note("no values");
  const labels = counts.map((_, i) => `${tickText(edges[i])} – ${tickText(edges[i + 1])}`);
  const low = edges[0];
  const high = edges[edges.length - 1];
  // A constant column is one bin whose edges are its value.
  if (low === high) return h("div", {}, miniBars(counts, labels), note(`all ${tickText(low)}`));
  const range = `${tickText(low)} … ${tickText(high)}`;
  return h("div", {}, miniBars(counts, labels), note(mean === null ? range : `${range}, mean ${number(mean)}`));
}

function topCategories({ top, n_other: other }) {
  if (!top.length) return note("no values");
  const named = top.slice(0, 3).map((t) => t.value).join(", ");
  return h("div", {},
    miniBars(top.map((t) => t.count), top.map((t) => t.value)),
    note(other ? `${named} … (${number(other)} in other categories)` : named));
}

// Where the values live (the API's `storage`): parts in the data store, or a table
// registered where it lies (its URL shown to admin keys only).
function storage(dataset) {
  const stored = dataset.storage;
  if (!stored) return "in the database";
  const parts = `${number(stored.n_parts)} Parquet part${stored.n_parts === 1 ? "" : "s"}, ${bytes(stored.bytes)}`;
  if (!stored.registered) return `${parts} in the data store`;
  return h("span", {}, `${parts}, registered in place`, stored.url ? h("span", { class: "mono small" }, ` at ${stored.url}`) : null);
}

function downloadButton(dataset, format, message) {
  return h("button", { type: "button", id: `download-${format}`, onclick: async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    try {
      const blob = await getFile(`/v1/datasets/${encodeURIComponent(dataset.id)}/data?format=${format}`);
      download(`${dataset.name}.${format}`, blob);
    } catch (error) {
      replace(message, errorBox(error));
    } finally {
      button.disabled = false;
    }
  } }, `Download ${format === "csv" ? "CSV" : "Parquet"}`);
}

function distribution(column) {
  const stored = column.distribution;
  if (!stored) return note("not computed");
  return stored.histogram ? histogram(stored) : topCategories(stored);
}

export async function render(root, { params: [id] }, signal) {
  const dataset = await get(`/v1/datasets/${encodeURIComponent(id)}`, { signal });
  const rows = dataset.columns.map((column) => [
    h("span", { class: "mono" }, column.name),
    column.kind,
    number(column.n_missing),
    number(column.n_unique),
    distribution(column),
  ]);
  const message = h("div");
  const actions = h("div", { class: "row" });
  if (dataset.storage) actions.append(downloadButton(dataset, "parquet", message), downloadButton(dataset, "csv", message));
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
        ["stored", storage(dataset)],
        ["uploaded", when(dataset.created_at)],
        ["id", h("span", { class: "mono small" }, dataset.id)],
        ["sha256", h("span", { class: "mono small" }, dataset.sha256)],
      ]),
      actions, message),
    card("Columns", h("div", { id: "columns" }, table(["column", "kind", "missing", "distinct", "distribution"], rows, { numeric: [2, 3] }))),
  );
}
