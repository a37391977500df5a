// The lab updates itself in place: every few seconds it fetches its live parts
// (/lab/live: the latest payment above the controls, the tables below them) and
// swaps each in, so the page never reloads and the scroll position stays. "Pause updates" stops that (remembered for this browser), for a teacher
// who wants to point at something. Copy buttons copy the full value of a shortened id.
// The words come from the page (data-* attributes), in the page's language.
(function () {
  "use strict";
  var live = document.getElementById("lab-live");
  var parts = document.querySelectorAll("[data-live-part]");
  var toggle = document.getElementById("live-toggle");
  var state = document.getElementById("live-state");
  var SECONDS = 3;
  var paused = window.localStorage.getItem("lab-paused") === "1";

  function word(element, name, fallback) {
    return (element && element.getAttribute("data-" + name)) || fallback;
  }

  function show() {
    if (!toggle || !state) { return; }
    toggle.textContent = paused ? word(toggle, "resume", "Resume updates") : word(toggle, "pause", "Pause updates");
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    state.textContent = paused ? word(state, "paused", "Updates paused.") : word(state, "running", "Updating.");
  }

  function refresh() {
    if (paused || !live || document.hidden) { return; }
    fetch(live.getAttribute("data-live-url"), { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null || paused) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        Array.prototype.forEach.call(parts, function (part) {
          var found = fresh.querySelector('[data-live-part="' + part.getAttribute("data-live-part") + '"]');
          if (found) { part.innerHTML = found.innerHTML; }
        });
      })
      .catch(function () { /* the shop may be restarting: try again next time */ });
  }

  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      window.localStorage.setItem("lab-paused", paused ? "1" : "0");
      show();
      if (!paused) { refresh(); }
    });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button || !navigator.clipboard) { return; }
    navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
      // The word to put back is kept once: a second click within 1.5 s must not keep "Copied" for good.
      if (!button.hasAttribute("data-copy-label")) { button.setAttribute("data-copy-label", button.textContent); }
      button.textContent = word(button, "copied", "Copied");
      window.setTimeout(function () { button.textContent = button.getAttribute("data-copy-label"); }, 1500);
    });
  });
  show();
  window.setInterval(refresh, SECONDS * 1000);
})();
