// The "still processing" page looks again every two seconds by following its own
// "Check now" link, which ends on the order once the first payment has an answer.
// Without JavaScript the shopper presses the link. (No meta refresh: it cannot be
// paused or announced, and assistive technology reads it as a sudden new page.)
(function () {
  "use strict";
  var link = document.getElementById("check-now");
  if (!link) { return; }
  var seconds = Number(link.getAttribute("data-poll-seconds")) || 2;
  window.setTimeout(function () { window.location.replace(link.href); }, seconds * 1000);
})();
