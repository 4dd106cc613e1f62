// Floe console: small progressive enhancements. Every page works without this file.

// Copy buttons: <button data-copy="#element-id"> copies that element's exact text.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  const text = source.textContent;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API (plain http on a remote host): select the text instead.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    document.execCommand("copy");
  }
  const label = button.textContent;
  button.textContent = "Copied";
  button.classList.add("copied");
  setTimeout(() => {
    button.textContent = label;
    button.classList.remove("copied");
  }, 1500);
});

// Destructive forms ask first: <form data-confirm="Revoke this key?">.
document.addEventListener("submit", (event) => {
  const message = event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// After a failed submit, bring the first field with an error into view.
document.addEventListener("DOMContentLoaded", () => {
  const invalid = document.querySelector('[aria-invalid="true"]');
  if (invalid) invalid.focus();
});

// Live regions: <div id="x" data-refresh="3000"> is read again from the page's own URL
// every so often (while the tab is shown) and swapped in whole; boxes the person checked
// stay checked. A region whose new copy has no data-refresh (the work ended) stops.
document.addEventListener("DOMContentLoaded", () => {
  for (const first of document.querySelectorAll("[data-refresh][id]")) {
    const id = first.id;
    const every = Math.max(1000, Number(first.dataset.refresh) || 5000);
    const tick = async () => {
      const region = document.getElementById(id);
      if (!region || !region.hasAttribute("data-refresh")) return;
      if (!document.hidden) {
        try {
          const response = await fetch(window.location.href, { credentials: "same-origin" });
          const fresh = response.ok
            ? new DOMParser().parseFromString(await response.text(), "text/html").getElementById(id)
            : null;
          if (fresh) {
            const key = (box) => `${box.name}=${box.value}`;
            const checked = new Set(
              [...region.querySelectorAll("input[type=checkbox]:checked")].map(key),
            );
            for (const box of fresh.querySelectorAll("input[type=checkbox]")) {
              box.checked = checked.has(key(box));
            }
            region.replaceWith(fresh);
          }
        } catch {
          // The server did not answer this time: ask again at the next tick.
        }
      }
      setTimeout(tick, every);
    };
    setTimeout(tick, every);
  }
});

// The pipeline editor: <textarea data-editor="#lines"> keeps its height to its lines (so
// the numbered lines behind it stay aligned) and a numbered line for each of its lines.
// A line marked with a problem keeps its mark until the text is validated again.
document.addEventListener("DOMContentLoaded", () => {
  for (const area of document.querySelectorAll("textarea[data-editor]")) {
    const lines = document.querySelector(area.dataset.editor);
    if (!lines) continue;
    const fit = () => {
      const count = area.value.split("\n").length;
      while (lines.children.length < count) {
        const row = document.createElement("div");
        row.className = "editor-line";
        row.dataset.line = String(lines.children.length + 1);
        const number = document.createElement("span");
        number.className = "editor-number";
        number.textContent = row.dataset.line;
        row.append(number);
        lines.append(row);
      }
      while (lines.children.length > count && !lines.lastElementChild.title) {
        lines.lastElementChild.remove();
      }
      area.rows = Math.max(count, 1);
      area.style.height = "auto";
      area.style.height = `${area.scrollHeight}px`;
    };
    area.addEventListener("input", fit);
    area.addEventListener("keydown", (event) => {
      if (event.key !== "Tab" || event.shiftKey) return;
      event.preventDefault(); // two spaces, as YAML wants, rather than leaving the field
      area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
      fit();
    });
    fit();
  }
});
