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
