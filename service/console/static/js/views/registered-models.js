// Registered models: every name with its newest version and aliases; a form to add a name.

import { ApiError, get, isAdmin, post } from "../api.js";
import { card, errorBox, field, h, number, pager, replace, setFieldError, table, when } from "../dom.js";
import { NAME, nameLink, showFieldErrors } from "./registry.js";

const PAGE = 50;

export function aliasList(aliases, name) {
  const pairs = Object.entries(aliases || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!pairs.length) return h("span", { class: "muted" }, "—");
  return h("span", { class: "row" }, pairs.map(([alias, version]) =>
    h("span", { class: "tag", title: name ? `${name}@${alias}` : alias }, `${alias} → v${version}`)));
}

function createForm() {
  const nameInput = h("input", { type: "text", id: "rm-name", name: "name", placeholder: "churn", autocomplete: "off" });
  const descriptionInput = h("input", { type: "text", id: "rm-description", name: "description", placeholder: "optional" });
  const fields = { name: field("Name", nameInput), description: field("Description", descriptionInput) };
  const message = h("div");

  async function submit(event) {
    event.preventDefault();
    Object.values(fields).forEach((wrapper) => setFieldError(wrapper, ""));
    replace(message);
    const name = nameInput.value.trim();
    if (!NAME.test(name)) {
      setFieldError(fields.name, "Letters, digits, '_', '.' and '-', starting with a letter or digit (at most 128).");
      return;
    }
    try {
      await post("/v1/registered-models", { name, description: descriptionInput.value.trim() });
      location.hash = `#/registered-models/${encodeURIComponent(name)}`;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const rest = showFieldErrors(error, fields);
      if (error.status === 409) setFieldError(fields.name, error.message);
      else replace(message, errorBox(rest.length || !error.errors.length ? error : "See the marked fields."));
    }
  }

  return card("New registered name",
    h("form", { id: "rm-form", novalidate: true, onsubmit: submit },
      h("div", { class: "fields" }, fields.name, fields.description),
      h("p", { class: "small muted" }, "Or register a model from its page (\"Register as…\"), which makes the name when it is new."),
      h("div", { class: "row" }, h("button", { type: "submit", id: "rm-submit" }, "Create")), message));
}

export async function render(root, { query }, signal) {
  const offset = Number(query.get("offset") || 0);
  const page = await get(`/v1/registered-models?limit=${PAGE}&offset=${offset}`, { signal });
  const rows = page.items.map((item) => [
    nameLink(item.name),
    item.latest_version === null ? "—" : `v${item.latest_version}`,
    number(item.n_versions),
    aliasList(item.aliases, item.name),
    h("span", { class: "small" }, item.description || ""),
    when(item.created_at),
  ]);
  replace(
    root,
    h("h1", {}, "Registered models"),
    card(`${number(page.total)} name(s)`,
      h("p", { class: "small muted" }, "A name has numbered versions, each a model, and aliases (production, staging…) naming versions. Clients call ",
        h("code", {}, "/v1/models/{name}@{alias}"), "."),
      page.items.length
        ? h("div", { id: "registered-models" }, table(["name", "latest", "versions", "aliases", "description", "created"], rows, { numeric: [2] }))
        : h("p", { class: "muted" }, "No registered models yet."),
      pager("#/registered-models", offset, PAGE, page.total)),
    isAdmin() ? createForm() : null,
  );
}
