// Models: every fitted model with its headline validation score.

import { get } from "../api.js";
import { bytes, card, h, number, pager, replace, shortId, table, when } from "../dom.js";

const PAGE = 50;

/** The score a person looks for first: accuracy or R², on the validation rows if any. */
export function headline(model) {
  const metrics = model.metrics || {};
  const name = model.task === "classification" ? "accuracy" : "r2";
  const cv = metrics.cv?.[name]?.mean;
  const value = metrics.validation?.[name] ?? cv ?? metrics.oob?.[name] ?? metrics.train?.[name];
  const where = metrics.validation?.[name] !== undefined ? "validation" : cv !== undefined ? "cv" : metrics.oob?.[name] !== undefined ? "oob" : "train";
  return value === undefined ? "—" : `${name === "r2" ? "R²" : name} ${number(value)} (${where})`;
}

export async function render(root, { query }, signal) {
  const offset = Number(query.get("offset") || 0);
  const page = await get(`/v1/models?limit=${PAGE}&offset=${offset}`, { signal });
  const rows = page.items.map((model) => [
    h("a", { href: `#/models/${model.id}` }, model.name || shortId(model.id)),
    model.method,
    model.task,
    model.target,
    headline(model),
    bytes(model.size_bytes),
    when(model.created_at),
  ]);
  replace(
    root,
    h("h1", {}, "Models"),
    card(`${number(page.total)} model(s)`,
      page.items.length ? table(["model", "method", "task", "target", "score", "size", "created"], rows, { numeric: [5] }) : h("p", { class: "muted" }, "No models yet: train one."),
      pager("#/models", offset, PAGE, page.total)),
  );
}
