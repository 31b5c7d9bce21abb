// csparql pages: refresh while something is in progress, and open Airflow's own pages in the Airflow UI.
(function () {
  "use strict";
  var body = document.body;

  // Pages with runs in progress (or a DAG not parsed yet) refresh themselves, unless the user is typing.
  var refresh = parseInt(body.dataset.refresh || "", 10);
  if (refresh > 0) {
    var reload = function () {
      var active = document.activeElement;
      if (active && (active.tagName === "INPUT" || active.tagName === "TEXTAREA") && active.value) {
        window.setTimeout(reload, refresh * 1000);
        return;
      }
      window.location.reload();
    };
    window.setTimeout(reload, refresh * 1000);
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
