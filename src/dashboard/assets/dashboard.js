// mcp-task-layer dashboard: live updates over SSE and actions without a
// reload. Written for this crate; no build step, no dependency.
(function () {
  "use strict";

  function setLive(text) {
    var el = document.getElementById("live-state");
    if (el) { el.textContent = text; }
  }

  function stamp() {
    return new Date().toISOString().slice(11, 19);
  }

  // The task page keeps the statuses it has seen, newest last.
  function noteStatus(status) {
    var live = document.getElementById("live-task");
    var history = document.getElementById("history");
    if (!live || !history || live.getAttribute("data-task-status") === status) { return; }
    live.setAttribute("data-task-status", status);
    var item = document.createElement("li");
    item.textContent = status + " ";
    var when = document.createElement("span");
    when.className = "muted";
    when.textContent = "at " + stamp() + " UTC";
    item.appendChild(when);
    history.appendChild(item);
  }

  function apply(update) {
    if (update.error) { setLive(update.error); return; }
    var counts = update.counts || {};
    Object.keys(counts).forEach(function (name) {
      document.querySelectorAll('[data-count="' + name + '"]').forEach(function (el) {
        el.textContent = String(counts[name]);
      });
    });
    var fragments = update.fragments || {};
    // The server escaped every text of a task in these fragments.
    Object.keys(fragments).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.innerHTML = fragments[id]; }
    });
    if (update.status) { noteStatus(update.status); }
    setLive("live · " + stamp());
  }

  var url = document.body.getAttribute("data-events");
  if (url && window.EventSource) {
    var source = new EventSource(url);
    source.addEventListener("update", function (e) {
      try { apply(JSON.parse(e.data)); } catch (err) { setLive("bad update"); }
    });
    source.addEventListener("error", function () { setLive("reconnecting…"); });
  }

  // Forms marked data-async post in the background; the page changes
  // when the server says so over SSE.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.hasAttribute || !form.hasAttribute("data-async")) { return; }
    e.preventDefault();
    var button = form.querySelector("button");
    var output = form.querySelector("output");
    if (button) { button.disabled = true; }
    fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      headers: { "Accept": "application/json" },
      credentials: "same-origin"
    }).then(function (r) {
      return r.text().then(function (text) {
        var message = text;
        try { message = JSON.parse(text).message; } catch (err) { /* a refusal is plain text */ }
        if (output) { output.textContent = message; }
        if (!r.ok && button) { button.disabled = false; }
      });
    }).catch(function (err) {
      if (output) { output.textContent = String(err); }
      if (button) { button.disabled = false; }
    });
  });
})();
