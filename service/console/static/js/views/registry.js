// What the registry pages share: registering a model as the next version of a name (creating
// the name first when it is new, as the API wants over HTTP), and the "Register as…" card of
// the model page.

import { ApiError, get, isAdmin, post } from "../api.js";
import { card, errorBox, field, h, replace, select, setFieldError, shortId } from "../dom.js";

// The API's rule for names (service/registry/references.py).
export const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const LISTED = 200;

export function namePath(name) {
  return `/v1/registered-models/${encodeURIComponent(name)}`;
}

export function nameLink(name, text = name) {
  return h("a", { href: `#/registered-models/${encodeURIComponent(name)}` }, text);
}

/** Names that exist (the first LISTED of them, by name). */
export async function knownNames(signal) {
  const page = await get(`/v1/registered-models?limit=${LISTED}`, { signal });
  return page.items.map((item) => item.name);
}

/**
 * POST …/{name}/versions, creating the name first when it is not among the names known. The
 * list is read first so that the usual cases make no failing request (a browser logs those).
 */
export async function registerVersion(name, modelId, alias) {
  const body = alias ? { model_id: modelId, alias } : { model_id: modelId };
  const names = await knownNames();
  if (!names.includes(name)) {
    try {
      await post("/v1/registered-models", { name });
    } catch (error) {
      // Beyond the listed names, or made meanwhile by someone else: it exists, go on.
      if (!(error instanceof ApiError && error.status === 409)) throw error;
    }
  }
  return post(`${namePath(name)}/versions`, body);
}

/** Show each 422 error beside the field its `loc` names; returns those with no field. */
export function showFieldErrors(error, fields) {
  return error.errors.filter((e) => {
    const key = Object.keys(fields).find((name) => e.loc?.includes(name));
    if (key) setFieldError(fields[key], e.msg);
    return !key;
  });
}

/** A form: name (a new one is created) and an optional alias; `done(version)` after. */
export function registerForm(modelId, { idPrefix, fixedName, done }) {
  const nameInput = h("input", { type: "text", id: `${idPrefix}-name`, name: "name", list: `${idPrefix}-names`, autocomplete: "off", placeholder: "churn" });
  const names = h("datalist", { id: `${idPrefix}-names` });
  // On a model page the model is that one; on a name's page, one of the newest models.
  const modelInput = modelId
    ? h("input", { type: "hidden", id: `${idPrefix}-model`, name: "model_id", value: modelId })
    : select([["", "loading…"]], { id: `${idPrefix}-model`, name: "model_id" });
  const aliasInput = h("input", { type: "text", id: `${idPrefix}-alias`, name: "alias", placeholder: "optional, e.g. staging" });
  const fields = {
    name: field("Registered name", nameInput, "A new name is created."),
    model_id: field("Model", modelInput),
    alias: field("Alias", aliasInput, "Points at the new version."),
  };
  const message = h("div");
  const button = h("button", { type: "submit", id: `${idPrefix}-submit` }, "Register");

  async function submit(event) {
    event.preventDefault();
    Object.values(fields).forEach((wrapper) => setFieldError(wrapper, ""));
    replace(message);
    const name = fixedName || nameInput.value.trim();
    if (!NAME.test(name)) {
      setFieldError(fields.name, "Letters, digits, '_', '.' and '-', starting with a letter or digit (at most 128).");
      return;
    }
    if (!modelInput.value.trim()) {
      setFieldError(fields.model_id, "Which model?");
      return;
    }
    button.disabled = true;
    try {
      const version = await registerVersion(name, modelInput.value.trim(), aliasInput.value.trim() || null);
      done(version, message);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const rest = showFieldErrors(error, fields);
      replace(message, errorBox(rest.length || !error.errors.length ? error : "The server refused some values; see the marked fields."));
    } finally {
      button.disabled = false;
    }
  }

  if (!modelId) {
    get(`/v1/models?limit=${LISTED}`).then((page) => replace(modelInput, page.items.length
      ? page.items.map((m) => h("option", { value: m.id }, `${m.name || shortId(m.id)} · ${m.method} · ${m.target}`))
      : h("option", { value: "" }, "no models yet"))).catch((error) => replace(message, errorBox(error)));
  }
  if (!fixedName) knownNames().then((known) => replace(names, known.map((n) => h("option", { value: n })))).catch(() => {});
  return h("form", { id: `${idPrefix}-form`, novalidate: true, onsubmit: submit },
    h("div", { class: "fields" }, fixedName ? null : fields.name, modelId ? null : fields.model_id, fields.alias),
    names, h("div", { class: "row" }, button), message);
}

/** The model page's "Register as…" card (admin keys only). */
export function registerCard(model) {
  if (!isAdmin()) return null;
  const form = registerForm(model.id, {
    idPrefix: "register",
    done: (version, message) => replace(message, h("p", { id: "register-done" }, "Registered as ",
      nameLink(version.name, `${version.name} version ${version.version}`), version.aliases?.length ? ` (${version.aliases.join(", ")})` : "", ".")),
  });
  return card("Register as…", h("p", { class: "small muted" }, "Make this model the next version of a registered name; deployments then call it by name and alias."), form);
}
