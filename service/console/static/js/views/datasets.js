// Datasets: the list, and the upload (CSV, Parquet or Arrow) with a progress bar.

import { get, isAdmin, upload } from "../api.js";
import { bytes, card, errorBox, field, h, number, pager, progressBar, replace, setProgress, shortId, table, when } from "../dom.js";

const PAGE = 50;

function uploadForm() {
  const file = h("input", { type: "file", id: "upload-file", name: "file", accept: ".csv,text/csv,.parquet,.arrow,.feather", required: true });
  const name = h("input", { type: "text", id: "upload-name", name: "name", placeholder: "the file's name" });
  const categorical = h("input", { type: "text", id: "upload-categorical", name: "categorical", placeholder: "zip, store_id" });
  const bar = progressBar("upload progress");
  const barText = h("span", { class: "small muted" });
  const progress = h("div", { class: "stack hidden" }, bar, barText);
  const message = h("div");
  const submit = h("button", { type: "submit" }, "Upload");
  const form = h(
    "form",
    { class: "stack", onsubmit: async (event) => {
      event.preventDefault();
      const chosen = file.files[0];
      if (!chosen) return;
      const body = new FormData();
      body.append("file", chosen);
      if (name.value.trim()) body.append("name", name.value.trim());
      if (categorical.value.trim()) body.append("categorical", categorical.value.trim());
      submit.disabled = true;
      progress.classList.remove("hidden");
      replace(message);
      try {
        const dataset = await upload("/v1/datasets", body, (fraction) => {
          const percent = setProgress(bar, fraction);
          barText.textContent = percent < 100 ? `${percent}% of ${bytes(chosen.size)} sent` : "received; the server is reading the columns…";
        });
        setProgress(bar, 1);
        location.hash = `#/datasets/${dataset.id}`;
      } catch (error) {
        replace(message, errorBox(error));
        progress.classList.add("hidden");
      } finally {
        submit.disabled = false;
      }
    } },
    h("div", { class: "fields" },
      field("CSV file (with a header row)", file),
      field("Name", name),
      field("Categorical columns", categorical, "Comma-separated; kept categorical even if they hold numbers.")),
    h("div", { class: "row" }, submit),
    progress,
    message,
  );
  return card("Upload a CSV", form);
}

export async function render(root, { query }, signal) {
  const offset = Number(query.get("offset") || 0);
  const page = await get(`/v1/datasets?limit=${PAGE}&offset=${offset}`, { signal });
  const rows = page.items.map((d) => [
    h("a", { href: `#/datasets/${d.id}` }, d.name),
    number(d.n_rows),
    number(d.n_columns),
    bytes(d.size_bytes),
    when(d.created_at),
    h("span", { class: "mono small muted" }, shortId(d.id)),
  ]);
  const list = page.items.length
    ? table(["name", "rows", "columns", "size", "uploaded", "id"], rows, { numeric: [1, 2, 3] })
    : h("p", { class: "muted" }, isAdmin() ? "No datasets yet: upload a CSV above." : "No datasets yet.");
  replace(
    root,
    h("h1", {}, "Datasets"),
    isAdmin() ? uploadForm() : null,
    card(`All datasets (${page.total})`, list, pager("#/datasets", offset, PAGE, page.total)),
  );
}
