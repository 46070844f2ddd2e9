// Live updates of a review page: the server renders each update with
// html/template and sends it as a server-sent event; this script only puts
// it in place. The page works without it, by reloading.
"use strict";
(function () {
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const state = document.getElementById("live-state");
  if (!main || !live || !main.dataset.events || !window.EventSource) {
    return;
  }
  const events = new EventSource(main.dataset.events);
  let last = "";
  events.addEventListener("update", function (e) {
    const update = JSON.parse(e.data);
    if (update.error) {
      state.hidden = false;
      state.textContent = "Not updated: " + update.error;
      return;
    }
    state.hidden = true;
    if (update.html !== last) {
      last = update.html;
      // Keep the keyboard focus where it was when the same link or
      // button is rendered again.
      const focused = document.activeElement && live.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
      live.innerHTML = update.html;
      if (focused) {
        const again = live.querySelector("[href=\"" + CSS.escape(focused) + "\"]");
        if (again) {
          again.focus();
        }
      }
    }
    if (update.phase) {
      document.body.dataset.phase = update.phase;
    }
  });
  events.addEventListener("error", function () {
    state.hidden = false;
    state.textContent = "Reconnecting…";
  });
})();
