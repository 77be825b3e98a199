/* agent-health serve: renders the run list and a run's status bar from JSON, and asks the server
   again while a run is going. Every value becomes text (textContent), never markup. */
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);

  function when(ts) { return ts ? new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "-"; }
  function took(r) {
    if (!r.finished_at) return r.status === "running" ? "running" : "-";
    var s = r.finished_at - r.started_at;
    return s < 60 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min";
  }
  function progress(r) { return r.planned ? r.results + " / " + r.planned : String(r.results); }
  function cell(text, cls) { var td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; return td; }
  function badge(node, status) { node.textContent = status; node.className = "badge r-" + status; }
  function runUrl(id) { return "/runs/" + encodeURIComponent(id) + "/"; }

  // Ask `url` again every `ms` (longer when nothing runs); `show` returns false to stop.
  function poll(url, ms, show) {
    function again(delay) { setTimeout(tick, delay); }
    function tick() {
      fetch(url, { cache: "no-store" })
        .then(function (r) { if (!r.ok) throw new Error(url + ": HTTP " + r.status); return r.json(); })
        .then(function (j) { var go = show(j); if (go !== false) again(go === "slow" ? ms * 5 : ms); })
        .catch(function () { again(ms * 5); });  // the server restarting: keep asking, slowly
    }
    again(ms);
  }

  var runs = document.getElementById("runs");
  if (runs) {
    var body = runs.querySelector("tbody");
    var renderRuns = function (list) {
      var rows = list.map(function (r) {
        var tr = document.createElement("tr");
        tr.dataset.id = r.id;
        tr.dataset.status = r.status;
        var a = document.createElement("a");
        a.href = runUrl(r.id);
        a.textContent = r.id;
        var first = document.createElement("td");
        first.append(a);
        var st = document.createElement("span");
        badge(st, r.status);
        var second = document.createElement("td");
        second.append(st);
        if (r.error) second.append(" (damaged log)");
        if (r.abandoned) second.title = r.abandoned;
        tr.append(first, second, cell(progress(r), "n results"), cell(r.passed, "n"), cell(r.failed, "n"),
          cell(r.errored, "n"), cell(r.agents.join(", ") || "-"), cell(when(r.started_at)), cell(took(r), "n"));
        tr.addEventListener("click", function (e) { if (e.target.tagName !== "A") location.href = runUrl(r.id); });
        return tr;
      });
      body.replaceChildren.apply(body, rows);
      document.getElementById("no-runs").hidden = list.length > 0;
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      return list.some(function (r) { return r.status === "running"; }) ? true : "slow";
    };
    renderRuns(data);
    poll("/api/runs", Number(runs.dataset.poll), function (j) { return renderRuns(j.runs); });
  }

  var bar = document.getElementById("run-bar");
  if (bar) {
    var frame = document.getElementById("report");
    var last = null;
    var renderRun = function (r) {
      document.getElementById("run-id").textContent = r.id;
      document.title = "agent-health run " + r.id + " (" + r.status + ")";
      badge(document.getElementById("status"), r.status);
      document.getElementById("count").textContent = progress(r);
      ["passed", "failed", "errored"].forEach(function (k) { document.getElementById(k).textContent = r[k]; });
      document.getElementById("agents").textContent = r.agents.join(", ") || "-";
      document.getElementById("not-run").textContent = r.not_run ? r.not_run + " not run (" + (r.not_run_reason || "") + ")" : "";
      document.getElementById("abandoned").textContent = r.abandoned ? "abandoned: " + r.abandoned : "";
      document.getElementById("store-error").textContent =
        [r.not_stored ? r.not_stored + " result(s) could not be stored" : "", r.error || ""].filter(Boolean).join("; ");
      var key = r.status + " " + r.results + " " + r.finished_at;
      // The report under the bar is the stored run's page: render it again when the run changed
      // (its deep link, the part after #, stays).
      if (last !== null && key !== last) frame.contentWindow.location.reload();
      last = key;
      return r.status === "running";
    };
    if (renderRun(data)) poll("/api/runs/" + encodeURIComponent(data.id), Number(bar.dataset.poll), renderRun);
  }
})();
