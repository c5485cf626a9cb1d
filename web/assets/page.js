// Refreshes the status page in place every few seconds: fetches this page
// again from the same server and swaps its status line and <main>.
// Nothing else is loaded.
(function () {
  "use strict";
  var every = 3000;
  var box = document.getElementById("auto");
  var stamp = document.getElementById("updated");
  function refresh() {
    if (!box || !box.checked) { return schedule(); }
    fetch(location.pathname, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["status", "main"].forEach(function (id) {
          var next = doc.getElementById(id), cur = document.getElementById(id);
          if (next && cur) { cur.replaceWith(next); }
        });
        if (stamp) { stamp.hidden = true; }
      })
      .catch(function () { if (stamp) { stamp.hidden = false; } })
      .then(schedule);
  }
  function schedule() { setTimeout(refresh, every); }
  schedule();
})();
