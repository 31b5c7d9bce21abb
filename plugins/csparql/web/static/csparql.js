// csparql pages: refresh while something is in progress, and open Airflow's own pages in the Airflow UI.
(function () {
  "use strict";
  var body = document.body;

  // A page with runs in progress (or a DAG not parsed yet) asks every few seconds whether it is out of date
  // (GET api/queries/NAME: the windows' states, the DAG's) and reloads only then, and never while the user is
  // working on it: a reload already on its way is stopped when the user starts typing or clicking.
  var refresh = parseInt(body.dataset.refresh || "", 10);
  if (refresh > 0 && body.dataset.stateUrl) {
    var interacted = 0;
    var reloading = false;
    var busy = function () {
      var active = document.activeElement;
      var typing = active && (active.tagName === "INPUT" || active.tagName === "TEXTAREA") && active.value;
      return typing || Date.now() - interacted < refresh * 2000;
    };
    ["focusin", "input", "keydown", "mousedown"].forEach(function (type) {
      document.addEventListener(type, function () {
        interacted = Date.now();
        if (reloading) {
          window.stop();
          reloading = false;
          window.setTimeout(poll, refresh * 1000);
        }
      }, true);
    });
    var poll = function () {
      if (busy()) {
        window.setTimeout(poll, refresh * 1000);
        return;
      }
      fetch(body.dataset.stateUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (state) {
          if (state && state.signature !== body.dataset.signature && !busy()) {
            reloading = true;
            window.location.reload();
          } else {
            window.setTimeout(poll, refresh * 1000);
          }
        })
        .catch(function () { window.setTimeout(poll, refresh * 1000); });
    };
    window.setTimeout(poll, refresh * 1000);
  }

  // Inside Airflow's frame, links to Airflow pages (runs, logs, DAGs) navigate the Airflow UI itself: the
  // frame is sandboxed without top navigation, but it is same-origin, so it asks the UI's router.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a[data-airflow]");
    if (!link || window.top === window || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) {
      return;
    }
    try {
      var url = new URL(link.href, window.location.href);
      if (url.origin !== window.top.location.origin) return;
      window.top.history.pushState(null, "", url.pathname + url.search + url.hash);
      window.top.dispatchEvent(new PopStateEvent("popstate", { state: null }));
      event.preventDefault();
    } catch (error) {
      // not allowed to reach the top window: let the link open in the frame
    }
  });
})();
