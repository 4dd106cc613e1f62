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
