// When a form comes back with errors, put the cursor in the first field that has one,
// so a keyboard or screen-reader user starts where the problem is.
(function () {
  "use strict";
  var invalid = document.querySelector("[aria-invalid='true']");
  if (invalid) { invalid.focus(); }
})();
