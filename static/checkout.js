// Layer 1, the client: once the form is submitted, the Pay button is disabled,
// so an impatient double-click sends one request. The server does not rely on
// this (it still deduplicates by the idempotency key), and without JavaScript
// everything still works.
(function () {
  "use strict";
  var form = document.getElementById("checkout-form");
  if (!form) { return; }
  form.addEventListener("submit", function () {
    var button = form.querySelector("[data-testid='pay-button']");
    // The lab can turn the guard off for one browser, to show the server catching the duplicate.
    if (!button || form.getAttribute("data-button-guard") === "off") { return; }
    // The button has no name, so disabling it now takes nothing from the form data.
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    button.textContent = button.getAttribute("data-busy-label") || "Processing payment…";
  });
  // Coming back with the back button: the page may come from the cache with a disabled button.
  window.addEventListener("pageshow", function (event) {
    var button = form.querySelector("[data-testid='pay-button']");
    if (event.persisted && button) { window.location.reload(); }
  });
})();
