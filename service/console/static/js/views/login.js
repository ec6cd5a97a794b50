// The key form, shown when the server wants API keys and this tab has none. The key is kept
// in sessionStorage: for this tab only, gone when it closes.

import { ApiError, roleOf, signIn } from "../api.js";
import { card, errorBox, field, h, replace } from "../dom.js";

export async function render(root, { query }) {
  const input = h("input", { type: "password", id: "api-key", name: "api-key", autocomplete: "off", required: true, spellcheck: "false" });
  const message = h("div");
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    { class: "stack", onsubmit: async (event) => {
      event.preventDefault();
      const key = input.value.trim();
      if (!key) return;
      submit.disabled = true;
      replace(message);
      try {
        signIn(key, await roleOf(key));
        location.hash = query.get("next") || "#/";
      } catch (error) {
        const text = error instanceof ApiError && error.status === 401 ? "That key is not valid here." : error;
        replace(message, errorBox(text));
      } finally {
        submit.disabled = false;
      }
    } },
    field("API key", input, "An admin key may do everything; a predict key reads and predicts."),
    submit,
    message,
  );
  replace(root, h("h1", {}, "Sign in"), card(null, h("p", { class: "muted" }, "This server asks for an API key. The console keeps it for this tab only."), form));
  input.focus();
}
