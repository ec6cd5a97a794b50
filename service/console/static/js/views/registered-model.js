// One registered name: its versions (each a model), its aliases with a form to move one
// (PUT …/aliases/{alias}, atomic on the server) or delete it, the history of every move, a
// form to register another model as the next version, and deleting the name.

import { del, get, isAdmin, put } from "../api.js";
import { card, errorBox, facts, field, h, number, replace, select, setFieldError, shortId, table, when } from "../dom.js";
import { aliasList } from "./registered-models.js";
import { namePath, registerForm, showFieldErrors } from "./registry.js";

const COMMON_ALIASES = ["production", "staging", "champion", "candidate"];
// The API's rule for aliases (unlike names: no '.', no leading digit, which reads as a version).
const ALIAS = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

function modelLink(modelId) {
  return h("a", { href: `#/models/${modelId}`, class: "mono" }, shortId(modelId));
}

function version(number) {
  return number === null || number === undefined ? "—" : `v${number}`;
}

function danger(text, label, action) {
  return h("button", { type: "button", class: "danger small", "aria-label": label, onclick: action }, text);
}

function versionsTable(entry, refresh, say) {
  const rows = entry.versions.slice().reverse().map((v) => [
    h("strong", {}, version(v.version)),
    modelLink(v.model_id),
    v.aliases.length ? v.aliases.join(", ") : h("span", { class: "muted" }, "—"),
    h("code", { class: "small" }, `${entry.name}@${v.version}`),
    v.created_by || h("span", { class: "muted" }, "—"),
    when(v.created_at),
    isAdmin() ? danger("Delete", `Delete version ${v.version}`, async () => {
      if (!confirm(`Delete version ${v.version} of ${entry.name}? Its number is never given again; the model stays.`)) return;
      try {
        await del(`${namePath(entry.name)}/versions/${v.version}`);
        await refresh(`Version ${v.version} deleted.`);
      } catch (error) {
        say(errorBox(error));
      }
    }) : null,
  ]);
  if (!rows.length) return h("p", { class: "muted" }, "No versions yet.");
  return h("div", { id: "versions" }, table(["version", "model", "aliases", "reference", "registered by", "registered", ""], rows));
}

function aliasesCard(entry, refresh, say) {
  const byVersion = new Map(entry.versions.map((v) => [v.version, v]));
  const rows = Object.entries(entry.aliases).sort(([a], [b]) => a.localeCompare(b)).map(([alias, number]) => [
    h("strong", {}, alias),
    version(number),
    byVersion.has(number) ? modelLink(byVersion.get(number).model_id) : "—",
    isAdmin() ? danger("Delete", `Delete alias ${alias}`, async () => {
      if (!confirm(`Delete alias ${alias} of ${entry.name}? Calls to ${entry.name}@${alias} will fail.`)) return;
      try {
        await del(`${namePath(entry.name)}/aliases/${encodeURIComponent(alias)}`);
        await refresh(`Alias ${alias} deleted.`);
      } catch (error) {
        say(errorBox(error));
      }
    }) : null,
  ]);
  const list = rows.length
    ? h("div", { id: "aliases" }, table(["alias", "version", "model", ""], rows))
    : h("p", { class: "muted", id: "aliases" }, "No aliases yet.");
  return card("Aliases", list, isAdmin() && entry.versions.length ? moveForm(entry, refresh) : null);
}

function moveForm(entry, refresh) {
  const suggestions = [...new Set([...Object.keys(entry.aliases), ...COMMON_ALIASES])];
  const aliasInput = h("input", { type: "text", id: "alias-name", name: "alias", list: "alias-names", value: "production", autocomplete: "off" });
  const versionInput = select(entry.versions.slice().reverse().map((v) => [String(v.version), `v${v.version} · ${shortId(v.model_id)}`]), { id: "alias-version", name: "version" });
  const fields = { alias: field("Alias", aliasInput), version: field("Version", versionInput) };
  const message = h("div");

  async function submit(event) {
    event.preventDefault();
    Object.values(fields).forEach((wrapper) => setFieldError(wrapper, ""));
    replace(message);
    const alias = aliasInput.value.trim();
    if (!ALIAS.test(alias)) {
      setFieldError(fields.alias, "Letters, digits, '_' and '-', starting with a letter or '_' (at most 64).");
      return;
    }
    try {
      const moved = await put(`${namePath(entry.name)}/aliases/${encodeURIComponent(alias)}`, { version: Number(versionInput.value) });
      await refresh(moved.previous_version
        ? `${alias} moved from v${moved.previous_version} to v${moved.version}.`
        : `${alias} now names v${moved.version}.`);
    } catch (error) {
      const rest = error.errors ? showFieldErrors(error, fields) : [];
      replace(message, errorBox(rest.length || !error.errors?.length ? error : "See the marked fields."));
    }
  }

  return h("form", { id: "alias-form", novalidate: true, onsubmit: submit },
    h("h3", {}, "Move an alias"),
    h("p", { class: "small muted" }, "The alias points at the chosen version at once (a new alias is made); every server follows within two seconds, and the move is kept below."),
    h("datalist", { id: "alias-names" }, suggestions.map((a) => h("option", { value: a }))),
    h("div", { class: "fields" }, fields.alias, fields.version),
    h("div", { class: "row" }, h("button", { type: "submit", id: "alias-submit" }, "Move")), message);
}

async function historyCard(name, signal) {
  const page = await get(`${namePath(name)}/history?limit=100`, { signal });
  const rows = page.items.map((move) => [
    when(move.moved_at),
    h("strong", {}, move.alias),
    move.from_version === null ? h("span", { class: "muted" }, "new") : version(move.from_version),
    move.to_version === null ? h("span", { class: "muted" }, "deleted") : version(move.to_version),
    move.actor || h("span", { class: "muted" }, "—"),
  ]);
  return card(`Alias history (${number(page.total)})`, rows.length
    ? h("div", { id: "history" }, table(["when", "alias", "from", "to", "who"], rows))
    : h("p", { class: "muted", id: "history" }, "No alias has moved yet."),
  page.total > page.items.length ? h("p", { class: "small muted" }, `The newest ${page.items.length} moves.`) : null);
}

export async function render(root, { params: [name] }, signal) {
  const flash = h("div", { id: "registry-message", "aria-live": "polite" });
  const say = (...children) => replace(flash, ...children);

  async function refresh(text) {
    await show();
    say(text ? h("p", { class: "notice" }, text) : null);
  }

  async function show() {
    const entry = await get(namePath(name), { signal });
    const history = await historyCard(name, signal);
    const remove = isAdmin() ? h("button", { type: "button", class: "danger", id: "registry-delete", onclick: async () => {
      if (!confirm(`Delete ${name} with its versions, aliases and history? The models stay.`)) return;
      try {
        await del(namePath(name));
        location.hash = "#/registered-models";
      } catch (error) {
        say(errorBox(error));
      }
    } }, "Delete this name") : null;
    const register = isAdmin()
      ? card("Register a model as the next version", registerForm(null, {
        idPrefix: "version", fixedName: name, done: (v) => refresh(`Registered as v${v.version}.`),
      }))
      : null;
    replace(
      root,
      h("p", { class: "small" }, h("a", { href: "#/registered-models" }, "← Registered models")),
      h("h1", {}, entry.name),
      flash,
      card(null,
        facts([
          ["description", entry.description || undefined],
          ["latest version", version(entry.latest_version)],
          ["versions", number(entry.versions.length)],
          ["aliases", aliasList(entry.aliases, entry.name)],
          ["created", when(entry.created_at)],
        ]),
        h("div", { class: "row" }, remove)),
      card("Versions", versionsTable(entry, refresh, say)),
      aliasesCard(entry, refresh, say),
      history,
      register,
    );
  }

  await show();
}
