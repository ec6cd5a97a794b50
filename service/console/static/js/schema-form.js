// A method's parameter form, generated from the JSON Schema of its params in GET /v1/methods:
// one field per property, its default filled in and its bounds checked before sending. Only
// values changed from their defaults are sent, so the server resolves the rest as it would
// for any client; a 422 from the server is shown beside the field it names. JSON null (the
// method decides: no depth limit, no class weights, ...) is an empty field whose placeholder
// says "none", and typing "none" (or "null") asks for it where the default is something else.

import { field, h, select, setFieldError } from "./dom.js";

function alternatives(property) {
  return property.anyOf || property.oneOf || [property];
}

function isStructured(alternative) {
  return Boolean(alternative.$ref) || alternative.type === "object" || alternative.type === "array";
}

/** Which control a property gets: checkbox, select, number, json (nested learners) or text. */
function controlKind(property) {
  const alts = alternatives(property);
  if (alts.filter((alt) => alt.type !== "null").every(isStructured)) return "json";
  if (alts.length === 1 && alts[0].type === "boolean") return "boolean";
  if (alts.length === 1 && alts[0].enum) return "select";
  if (alts.length === 1 && (alts[0].type === "integer" || alts[0].type === "number")) return "number";
  return "text";
}

/** A number for people: four significant digits at most (1/3 reads 0.3333). */
function rounded(value) {
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
}

/** A value for people: null is "none", numbers are rounded. */
function label(value) {
  if (value === null) return "none";
  return typeof value === "number" ? rounded(value) : JSON.stringify(value);
}

function bound(alt) {
  const lo = alt.minimum ?? alt.exclusiveMinimum;
  const hi = alt.maximum ?? alt.exclusiveMaximum;
  const left = alt.minimum !== undefined ? "[" : "(";
  const right = alt.maximum !== undefined ? "]" : ")";
  if (lo === undefined && hi === undefined) return "";
  return ` in ${left}${lo === undefined ? "-∞" : rounded(lo)}, ${hi === undefined ? "∞" : rounded(hi)}${right}`;
}

/** A person's description of what a property accepts, e.g. "integer in [1, ∞) or none". */
function accepts(property) {
  return alternatives(property).map((alt) => {
    if (alt.enum) return alt.enum.map(label).join(" | ");
    if (alt.type === "null") return "none";
    if (isStructured(alt)) return alt.$ref ? "a learner {method, params}" : alt.type;
    return `${alt.type}${bound(alt)}`;
  }).join(" or ");
}

function fits(alt, value) {
  if (alt.enum) return alt.enum.includes(value);
  if (alt.type === "null") return value === null;
  if (alt.type === "boolean") return typeof value === "boolean";
  if (alt.type === "string") return typeof value === "string";
  if (alt.type === "integer" && !Number.isInteger(value)) return false;
  if (alt.type === "number" && typeof value !== "number") return false;
  if (alt.type === "integer" || alt.type === "number") {
    if (alt.minimum !== undefined && value < alt.minimum) return false;
    if (alt.exclusiveMinimum !== undefined && value <= alt.exclusiveMinimum) return false;
    if (alt.maximum !== undefined && value > alt.maximum) return false;
    if (alt.exclusiveMaximum !== undefined && value >= alt.exclusiveMaximum) return false;
    return true;
  }
  return isStructured(alt);
}

/** Docstring markup (``code``, :class:`name`) as plain text, its long decimals rounded (the
 * server writes defaults such as 1/3 at full precision). */
function plain(text) {
  if (!text) return "";
  return text
    .replace(/:\w+:`~?([^`]+)`/g, "$1")
    .replaceAll("``", "")
    .replace(/-?\d+\.\d{5,}(?:e[+-]?\d+)?/g, (match) => rounded(Number(match)));
}

/** A value as a field holds it: exact (so an untouched field equals its default), null empty. */
function shown(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** What an empty field means, when that is a value worth saying ("none"). */
function placeholder(property) {
  return property.default === null ? "none" : undefined;
}

/** Text typed into a free field → the value it stands for. */
function parseText(text, property) {
  const trimmed = text.trim();
  if (/^(null|none)$/i.test(trimmed)) return null;
  // A field that also takes objects or lists (class weights, say) reads those as JSON.
  if (/^[[{]/.test(trimmed) && alternatives(property).some(isStructured)) return JSON.parse(trimmed);
  const asNumber = Number(trimmed);
  if (trimmed !== "" && Number.isFinite(asNumber)) {
    const wantsNumber = alternatives(property).some((alt) => alt.type === "number" || alt.type === "integer");
    if (wantsNumber) return asNumber;
  }
  if (trimmed === "true" || trimmed === "false") return trimmed === "true";
  return trimmed;
}

/** A select's option value: exact, and null apart from the "(the method's default)" choice. */
function optionKey(value) {
  return value === null ? "null" : shown(value);
}

function control(name, property) {
  const id = `param-${name}`;
  const kind = controlKind(property);
  if (kind === "boolean") return h("input", { type: "checkbox", id, name, checked: property.default === true });
  if (kind === "select") {
    const options = property.enum || alternatives(property)[0].enum;
    // No default in the schema (it depends on the task): an empty choice leaves it to the server.
    const unset = "default" in property ? [] : [["", "(the method's default)"]];
    const input = select([...unset, ...options.map((v) => [optionKey(v), label(v)])], { id, name });
    input.value = "default" in property ? optionKey(property.default) : "";
    return input;
  }
  const empty = placeholder(property);
  if (kind === "json") {
    return h("textarea", { id, name, rows: 2, placeholder: empty ?? shown(property.default) });
  }
  const alt = alternatives(property)[0];
  if (kind === "number") {
    return h("input", {
      type: "number", id, name, value: shown(property.default), placeholder: empty,
      min: alt.minimum ?? alt.exclusiveMinimum, max: alt.maximum ?? alt.exclusiveMaximum,
      step: alt.type === "integer" ? 1 : "any",
    });
  }
  const input = h("input", {
    type: "text", id, name, value: shown(property.default), placeholder: empty, list: `${id}-choices`,
  });
  const choices = alternatives(property).flatMap((a) => a.enum || (a.type === "null" ? [null] : []));
  if (!choices.length) return input;
  const options = choices.map((v) => h("option", { value: v === null ? "none" : shown(v) }));
  return [input, h("datalist", { id: `${id}-choices` }, options)];
}

/**
 * The form of `schema` for `task`: {element, read(), showErrors(errors), clear()}.
 * read() returns {params, valid}; invalid fields are marked on the spot.
 */
export function paramsForm(schema, task) {
  const entries = Object.entries(schema.properties || {})
    .filter(([, p]) => !p["x-tasks"] || p["x-tasks"].includes(task))
    .sort(([a], [b]) => a.localeCompare(b));
  const fields = new Map();
  const grid = h("div", { class: "fields" });
  for (const [name, property] of entries) {
    const made = control(name, property);
    const [input, ...extra] = Array.isArray(made) ? made : [made];
    const hint = [plain(property.description), accepts(property)].filter(Boolean).join(" · ");
    const wrapper = field(name, input, hint);
    if (input.type === "checkbox") wrapper.classList.add("check");
    wrapper.append(...extra);
    fields.set(name, { input, property, wrapper });
    grid.append(wrapper);
  }

  function valueOf({ input, property }) {
    const kind = controlKind(property);
    if (kind === "boolean") return input.checked;
    if (kind === "json") return input.value.trim() === "" ? undefined : JSON.parse(input.value);
    if (kind === "number") return input.value === "" ? undefined : Number(input.value);
    if (kind === "select") {
      return (property.enum || alternatives(property)[0].enum).find((v) => optionKey(v) === input.value);
    }
    return input.value.trim() === "" ? undefined : parseText(input.value, property);
  }

  function read() {
    const params = {};
    let valid = true;
    for (const [name, entry] of fields) {
      let value;
      try {
        value = valueOf(entry);
      } catch {
        setFieldError(entry.wrapper, "not valid JSON");
        valid = false;
        continue;
      }
      if (value === undefined || JSON.stringify(value) === JSON.stringify(entry.property.default)) {
        setFieldError(entry.wrapper, "");
        continue;
      }
      if (!alternatives(entry.property).some((alt) => fits(alt, value))) {
        setFieldError(entry.wrapper, `must be ${accepts(entry.property)}`);
        valid = false;
        continue;
      }
      setFieldError(entry.wrapper, "");
      params[name] = value;
    }
    return { params, valid };
  }

  /** Marks the fields a 422 names (loc [..., "params", name]); returns the errors left over. */
  function showErrors(errors) {
    const rest = [];
    for (const error of errors) {
      const at = error.loc.indexOf("params");
      const entry = at >= 0 ? fields.get(String(error.loc[at + 1])) : undefined;
      if (entry) setFieldError(entry.wrapper, error.msg);
      else rest.push(error);
    }
    return rest;
  }

  function clear() {
    for (const { wrapper } of fields.values()) setFieldError(wrapper, "");
  }

  const element = entries.length ? grid : h("p", { class: "muted" }, "This method has no parameters.");
  return { element, read, showErrors, clear };
}
