// A few helpers to build the page from code: no template strings become HTML, so nothing a
// dataset or a model holds (column names, categories) can turn into markup.

const PROPERTIES = new Set(["value", "checked", "selected", "disabled", "multiple", "hidden"]);

/** h("a", {href: "#/x", onclick: f}, "text", child, [more]) → an element. */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (PROPERTIES.has(name)) element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
  return parent;
}

export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

/** A table in a horizontally scrolling box (wide tables stay usable at phone width). */
export function table(headers, rows, { numeric = [] } = {}) {
  const isNumeric = (index) => numeric.includes(index);
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      h("thead", {}, h("tr", {}, headers.map((text, i) => h("th", { class: isNumeric(i) ? "num" : null }, text)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell, i) => h("td", { class: isNumeric(i) ? "num" : null }, cell))))),
    ),
  );
}

export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined && v !== null).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export function card(title, ...children) {
  return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...children);
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, error instanceof Error ? error.message : String(error));
}

export function status(value) {
  return h("span", { class: `status ${value}` }, value);
}

/** A progress bar whose fill the caller moves with setProgress. */
export function progressBar(label) {
  const fill = h("div", { class: "fill" });
  const bar = h("div", { class: "bar", role: "progressbar", "aria-label": label, "aria-valuemin": 0, "aria-valuemax": 100 }, fill);
  return bar;
}

export function setProgress(bar, fraction) {
  const percent = Math.round(Math.max(0, Math.min(1, fraction || 0)) * 100);
  bar.setAttribute("aria-valuenow", String(percent));
  // A CSSOM write, which the page's CSP allows (a style attribute it would not).
  bar.firstElementChild.style.width = `${percent}%`;
  return percent;
}

export function number(value, digits = 4) {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return value.toLocaleString("en");
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e6)) return value.toExponential(2);
  return value.toLocaleString("en", { maximumSignificantDigits: digits });
}

export function bytes(count) {
  const units = ["B", "KB", "MB", "GB"];
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}

export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return h("time", { datetime: iso, title: iso }, date.toLocaleString("en", { dateStyle: "medium", timeStyle: "short" }));
}

export function shortId(id) {
  return id ? id.slice(0, 8) : "—";
}

/** A labelled form field; `control` is an input, select or textarea. */
export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2)}`;
  control.id = id;
  const error = h("p", { class: "field-error", id: `${id}-error`, "aria-live": "polite" });
  control.setAttribute("aria-describedby", error.id);
  const wrapper = h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("span", { class: "hint" }, hint) : null, error);
  return wrapper;
}

export function setFieldError(wrapper, message) {
  wrapper.classList.toggle("invalid", Boolean(message));
  wrapper.querySelector(".field-error").textContent = message || "";
}

export function select(options, props = {}) {
  return h(
    "select",
    props,
    options.map((option) => {
      const [value, text] = Array.isArray(option) ? option : [option, option];
      return h("option", { value }, text);
    }),
  );
}

/** Offer `text` (or a Blob) as a file download named `name` (a blob: URL, revoked after the click). */
export function download(name, text, type = "text/csv") {
  const url = URL.createObjectURL(text instanceof Blob ? text : new Blob([text], { type }));
  const link = h("a", { href: url, download: name, class: "hidden" });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Links to the previous and next pages of a listing of `total` items, `size` a page. */
export function pager(base, offset, size, total) {
  if (total <= size) return null;
  const link = (to, text) => h("a", { href: `${base}${base.includes("?") ? "&" : "?"}offset=${to}` }, text);
  return h("p", { class: "row small" },
    offset > 0 ? link(Math.max(0, offset - size), "← newer") : null,
    `${offset + 1}–${Math.min(total, offset + size)} of ${total}`,
    offset + size < total ? link(offset + size, "older →") : null);
}
