/* agent-health report pages: shared rendering and the test table (filter, sort, open, deep links).
   Every value from a result becomes text (textContent / text nodes / attribute values), never
   markup: agent output is hostile. */
"use strict";
var AH = (function () {
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = String(v);
        else e.setAttribute(k, String(v));
      }
    }
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(parent, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(parent, c); }); return; }
    parent.append(child instanceof Node ? child : String(child));
  }
  function pre(text, cls) { return el("pre", { class: cls || null, text: text }); }
  function json(value) {
    if (typeof value === "string") return pre(value);
    var flat = JSON.stringify(value);
    return pre(flat.length <= 100 ? flat : JSON.stringify(value, null, 2));  // short values on one line
  }
  function badge(text, cls) { return el("span", { class: "badge " + cls, text: text }); }

  function num(v, digits) { return v === null || v === undefined ? "-" : Number(v).toFixed(digits === undefined ? 2 : digits); }
  function ms(v) { if (v === null || v === undefined) return "-"; return Math.abs(v) < 1000 ? v.toFixed(0) + " ms" : (v / 1000).toFixed(2) + " s"; }
  function usd(v) { if (v === null || v === undefined) return "-"; return "$" + (v >= 0.01 || v === 0 ? v.toFixed(4) : v.toFixed(6)); }
  function tokens(u) { if (!u || !u.total_tokens) return "-"; return u.total_tokens + " (" + u.input_tokens + " in / " + u.output_tokens + " out)" + (u.model ? " " + u.model : ""); }

  function kv(rows) {
    var body = el("tbody");
    rows.forEach(function (r) {
      if (r[1] === null || r[1] === undefined || r[1] === "") return;
      var value = r[1];
      if (typeof value === "object" && !(value instanceof Node)) value = json(value);
      body.append(el("tr", null, el("td", { text: r[0] }), el("td", null, value)));
    });
    return el("table", { class: "kv" }, body);
  }
  function section(title) {
    var s = el("section", null, el("h4", { text: title }));
    for (var i = 1; i < arguments.length; i++) add(s, arguments[i]);
    return s;
  }

  function outcome(sig) {
    if (sig.errored) return badge("errored", "s-errored");
    if (sig.skipped) return badge("skipped", "s-skipped");
    if (sig.passed === true) return badge("passed", "s-passed");
    if (sig.passed === false) return badge(sig.role === "observe" ? "failed (observe)" : "failed", sig.role === "observe" ? "s-observe" : "s-failed");
    return badge("measured", "s-skipped");
  }

  function renderStep(step) {
    var head = step.kind.replace("_", " ");
    if (step.tool) head += " \u00b7 " + step.tool;
    if (step.call_id) head += " #" + step.call_id;
    if (step.is_error) head += " \u00b7 tool error";
    if (step.role) head += " \u00b7 " + step.role;
    var extra = [];
    if (step.duration_ms !== null && step.duration_ms !== undefined) extra.push(ms(step.duration_ms));
    if (step.input_tokens || step.output_tokens) extra.push((step.input_tokens || 0) + " in / " + (step.output_tokens || 0) + " out tokens");
    var box = el("div", { class: "step k-" + step.kind + (step.role ? " r-" + step.role : "") + (step.is_error ? " error" : "") },
      el("div", { class: "head", text: head + (extra.length ? "  (" + extra.join(", ") + ")" : "") }));
    if (step.kind === "tool_call") box.append(json(step.args || {}));
    else if (step.content) box.append(pre(step.content));
    return box;
  }

  /* A conversation, turn by turn: the user's message, the agent's steps, its answer, and the turn's figures. */
  function renderConversation(run) {
    var c = run.conversation || {};
    var traj = run.trajectory || [];
    var head = run.turns.length + " turns, " + (c.mode === "simulated" ? "a simulated user" : "scripted user turns") + ", ended: " + c.ended;
    if (c.mode === "simulated") head += c.goal_reached ? " (goal reached at turn " + c.turns_to_goal + ")" : " (goal not reached)";
    var out = [el("div", { class: "conversation-head", text: head })];
    if (c.goal) out.push(kv([["goal", c.goal], ["user played by", c.user_model], ["user tokens", tokens(c.user_usage)]]));
    if (run.context && run.context.length) out.push(el("h3", { text: "Context" }), json(run.context));
    run.turns.forEach(function (t) {
      var figures = [ms(t.duration_ms), tokens(t.usage), t.replayed ? "replayed" : ""].filter(function (x) { return x && x !== "-"; });
      var box = el("div", { class: "turn" }, el("h3", { text: "Turn " + t.index + (figures.length ? "  (" + figures.join(", ") + ")" : "") }),
        el("div", { class: "step k-message r-user" }, el("div", { class: "head", text: "user" }), pre(t.user)));
      traj.slice(t.start + 1, t.end).forEach(function (s) { box.append(renderStep(s)); });
      box.append(el("div", { class: "turn-answer" }, el("b", { text: "answer: " }), pre(t.output || "")));
      out.push(box);
    });
    out.push(el("h3", { text: "Final output" }), pre(run.output || ""));
    return out;
  }

  function renderRun(run) {
    if (run.turns && run.turns.length) return renderConversation(run);
    var out = [];
    if (run.prompt) out.push(el("h3", { text: "Prompt" }), pre(run.prompt));
    if (run.context && run.context.length) out.push(el("h3", { text: "Context" }), json(run.context));
    out.push(el("h3", { text: "Steps (" + (run.trajectory || []).length + ")" }));
    (run.trajectory || []).forEach(function (s) { out.push(renderStep(s)); });
    out.push(el("h3", { text: "Final output" }), pre(run.output || ""));
    return out;
  }

  /* Files the agent produced: name, media type, size, hash; a stored text copy shown as text, a
     stored binary copy offered as a download (a data: URL built from its base64), else described. */
  function renderArtifact(a) {
    var size = a.size < 1024 ? a.size + " B" : (a.size / 1024).toFixed(1) + " KiB";
    var box = el("div", { class: "artifact" },
      el("div", { class: "head", text: a.name + " \u00b7 " + a.media_type + " \u00b7 " + size }));
    if (a.content !== null && a.content !== undefined && a.encoding === "utf-8") box.append(pre(a.content));
    else if (a.content && a.encoding === "base64") {
      box.append(el("a", { href: "data:" + a.media_type + ";base64," + a.content, download: a.name.split("/").pop(), text: "download" }));
    } else box.append(el("div", { class: "muted", text: "not stored" + (a.uri ? "; at " + a.uri : "") }));
    if (a.uri && a.content) box.append(el("div", { class: "muted", text: a.uri }));
    if (a.sha256) box.append(el("div", { class: "muted", text: "sha256 " + a.sha256 }));
    return box;
  }

  /* Page-specific additions (the run report adds a human label control to each current verdict). */
  var hooks = { verdict: null };

  function renderVerdict(sig, d) {
    var ev = sig.evidence || {};
    var who = [ev.evaluator, ev.model].filter(Boolean).join(" \u00b7 ");
    return el("div", { class: "verdict" },
      el("div", null, outcome(sig), " ", el("b", { text: sig.name }), sig.score !== null && sig.score !== undefined ? "  score " + num(sig.score) : "",
        "  ", el("span", { class: "muted", text: [sig.role, who, sig.cached ? "cached" : ""].filter(Boolean).join(" \u00b7 ") })),
      sig.reasoning ? pre(sig.reasoning) : el("div", { class: "muted", text: "(no reasoning)" }),
      ev.provenance ? kv(Object.entries(ev.provenance)) : null,
      d && hooks.verdict ? hooks.verdict(sig, d) : null);
  }

  function renderSignals(signals) {
    var body = el("tbody");
    signals.forEach(function (s) {
      var value = s.score !== null && s.score !== undefined ? num(s.score) : s.value !== null && s.value !== undefined ? String(s.value) : "-";
      var flags = [s.role, s.kind, s.soft ? "soft" : "", s.cached ? "cached" : ""].filter(Boolean).join(" \u00b7 ");
      body.append(el("tr", null,
        el("td", null, outcome(s)),
        el("td", null, el("div", { text: s.name }), el("div", { class: "muted", text: flags })),
        el("td", { class: "n", text: value }),
        el("td", null, s.reasoning ? pre(s.reasoning) : null,
          s.evidence ? el("details", null, el("summary", { text: "evidence" }), json(s.evidence)) : null)));
    });
    return el("table", null, el("thead", null, el("tr", null, el("th", { text: "outcome" }), el("th", { text: "signal" }),
      el("th", { class: "n", text: "score" }), el("th", { text: "reasoning and evidence" }))), body);
  }

  function renderInsight(ins) {
    return el("div", { class: "insight sev-" + ins.severity },
      el("div", null, badge(ins.severity, ins.severity === "error" ? "s-failed" : ins.severity === "warning" ? "s-errored" : "s-skipped"), " ",
        el("b", { text: ins.summary }), " ", el("span", { class: "muted", text: ins.rule })),
      ins.recommendation ? el("div", null, el("b", { text: "Recommendation: " }), ins.recommendation) : null,
      ins.evidence && Object.keys(ins.evidence).length ? el("details", null, el("summary", { text: "evidence" }), json(ins.evidence)) : null);
  }

  function renderTrials(trials) {
    var body = el("tbody");
    trials.forEach(function (t) {
      body.append(el("tr", null, el("td", { class: "n", text: t.epoch }), el("td", null, badge(t.status, "s-" + t.status)),
        el("td", { class: "n", text: num(t.score) }), el("td", { class: "n", text: ms(t.duration_ms) }),
        el("td", { class: "error-text", text: t.error || "" })));
    });
    return el("table", { class: "grid" }, el("thead", null, el("tr", null, el("th", { text: "trial" }), el("th", { text: "status" }),
      el("th", { class: "n", text: "score" }), el("th", { class: "n", text: "duration" }), el("th", { text: "error" }))), body);
  }

  function when(ts) { return ts ? new Date(ts * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : null; }

  function provenance(d) {
    var rows = [["source file", d.source_file], ["content hash", d.content_hash], ["evaluation run", d.eval_run_id],
      ["agent run id", d.run_id], ["trace id", d.run && d.run.trace_id], ["replayed", d.run && d.run.replayed ? "yes" : null],
      ["schema version", d.schema_version]];
    if (d.provenance && typeof d.provenance === "object") {
      Object.keys(d.provenance).forEach(function (k) {
        rows.push([k, k === "judged_at" ? when(d.provenance[k]) : d.provenance[k]]);
      });
    }
    return kv(rows);
  }

  /* Earlier judgements of a re-judged result, newest first (the result itself is the newest of all). */
  function renderJudgements(list) {
    return list.slice().reverse().map(function (j) {
      var judges = (j.judges || []).map(function (i) { return i.model ? i.provider + ":" + i.model : i.provider; });
      return el("div", { class: "judgement" },
        el("div", null, badge(j.status, "s-" + j.status), "  score " + num(j.score), "  ",
          el("span", { class: "muted", text: [when(j.judged_at), j.eval_run_id ? "run " + j.eval_run_id : "",
            judges.filter(function (x, n) { return judges.indexOf(x) === n; }).join(", ")].filter(Boolean).join(" \u00b7 ") })),
        j.error ? pre(j.error, "error-text") : null,
        (j.signals || []).map(function (s) { return renderVerdict(s); }));
    });
  }

  /* One test's details: what a reader needs to see why it passed or failed. */
  function renderDetail(d) {
    var root = el("div", { class: "detail-body" });
    var signals = d.signals || [];
    var verdicts = signals.filter(function (s) { return s.kind === "judge"; });
    root.append(section("Result", kv([
      ["status", badge(d.status, "s-" + d.status)], ["test", d.name], ["id", d.test_id], ["suite", d.suite],
      ["agent", d.agent], ["labels", (d.labels || []).join(", ")], ["score", num(d.score)],
      ["evaluation", d.evaluation_type], ["duration", ms(d.duration_ms)], ["agent tokens", tokens(d.usage)],
      ["judge tokens", tokens(d.judge_usage)], ["cost", usd(d.cost_usd)],
      ["epochs", d.epochs > 1 ? d.epochs + " (pass@k " + num(d.pass_at_k, 0) + ", pass^k " + num(d.pass_hat_k, 0) + (d.flaky ? ", flaky" : "") + ")" : null]
    ])));
    if (d.error) root.append(section("Error", pre(d.error, "error-text")));
    if (d.run) root.append(section(d.run.turns && d.run.turns.length ? "Conversation" : "Trajectory", renderRun(d.run)));
    if (d.run && (d.run.artifacts || []).length) root.append(section("Artifacts (" + d.run.artifacts.length + ")", d.run.artifacts.map(renderArtifact)));
    if (verdicts.length) root.append(section("Verdicts", verdicts.map(function (s) { return renderVerdict(s, d); })));
    if (signals.length) root.append(section("Signals", renderSignals(signals)));
    var metrics = d.metrics || {};
    if (Object.keys(metrics).length) root.append(section("Derived metrics", kv(Object.keys(metrics).sort().map(function (k) { return [k, metrics[k]]; }))));
    if ((d.insights || []).length) root.append(section("Insights and recommendations", d.insights.map(renderInsight)));
    if ((d.trials || []).length) root.append(section("Trials", renderTrials(d.trials)));
    if ((d.judgements || []).length) root.append(section("Earlier judgements (" + d.judgements.length + ")", renderJudgements(d.judgements)));
    root.append(section("Provenance", provenance(d)));
    return root;
  }

  function details(i) {
    var node = document.getElementById("d" + i);
    return node ? JSON.parse(node.textContent) : null;
  }

  /* The test list: each test is a div.test (a grid row, laid out only when on screen) with data-*
     attributes to filter and sort on; `render(i)` builds its details the first time it is opened. */
  function table(opts) {
    var tbl = document.getElementById(opts.table);
    var tests = Array.prototype.slice.call(tbl.querySelectorAll(".test"));
    var filters = opts.filters.map(function (f) { return { el: document.getElementById(f.id), attr: f.attr, list: !!f.list }; })
      .filter(function (f) { return f.el; });
    var search = document.getElementById(opts.search);
    var sort = document.getElementById(opts.sort);
    var count = document.getElementById(opts.count);
    var cache = tests.map(function (t) {
      var c = { text: (t.getAttribute("data-text") || "").toLowerCase() };
      filters.forEach(function (f) {
        var raw = t.getAttribute("data-" + f.attr) || "";
        c[f.attr] = f.list ? JSON.parse(raw || "[]") : raw;
      });
      return c;
    });

    function apply() {
      var q = search ? search.value.trim().toLowerCase() : "";
      var shown = 0;
      tests.forEach(function (t, n) {
        var c = cache[n];
        var ok = !q || c.text.indexOf(q) >= 0;
        for (var k = 0; ok && k < filters.length; k++) {
          var want = filters[k].el.value;
          if (!want) continue;
          ok = filters[k].list ? c[filters[k].attr].indexOf(want) >= 0 : c[filters[k].attr] === want;
        }
        t.hidden = !ok;
        if (ok) shown++;
      });
      if (count) count.textContent = shown + " of " + tests.length + " shown";
    }
    function reorder() {
      var spec = sort ? sort.value.split(":") : [""];
      var key = spec[0], dir = spec[1] === "desc" ? -1 : 1;
      var items = tests.slice();
      if (key) {
        items.sort(function (a, b) {
          var x = a.getAttribute("data-" + key), y = b.getAttribute("data-" + key);
          if (x === "" || x === null) return y === "" || y === null ? 0 : 1;  // missing values last
          if (y === "" || y === null) return -1;
          var d = key === "name" ? x.localeCompare(y) : parseFloat(x) - parseFloat(y);
          return d * dir || (+a.getAttribute("data-order") - +b.getAttribute("data-order"));
        });
      }
      var frag = document.createDocumentFragment();
      items.forEach(function (t) { frag.append(t); });
      tbl.append(frag);
    }
    function open(t, force) {
      var isOpen = t.classList.contains("open");
      if (isOpen && !force) { t.classList.remove("open"); t.querySelector(".detail").hidden = true; return; }
      if (isOpen) return;
      var box = t.querySelector(".detail");
      if (!box) {
        box = el("div", { class: "detail" });
        t.append(box);
        try { box.append(opts.render(t.getAttribute("data-i") || "", t)); }
        catch (e) { box.append(el("div", { class: "error-text", text: "cannot show this test: " + e })); throw e; }
      }
      box.hidden = false;
      t.classList.add("open");
    }
    function scrollTo(t) {  // to the top of the viewport, clear of the sticky controls
      var bar = document.querySelector(".controls");
      var top = t.getBoundingClientRect().top + window.pageYOffset - (bar ? bar.offsetHeight : 0) - 8;
      window.scrollTo(0, Math.max(0, top));
    }
    function scrollSettled(t) {
      // Rows off screen are laid out at an estimated height: once the rows above the target have
      // rendered at their real height, it may have moved, so place it again on the next frame.
      scrollTo(t);
      requestAnimationFrame(function () { scrollTo(t); });
    }
    function openHash() {
      var key;
      try { key = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
      var t = key && document.getElementById(key);
      if (!t || !t.classList || !t.classList.contains("test")) return;
      if (t.hidden) {  // a deep link wins over the filters that hide its test
        filters.forEach(function (f) { f.el.value = ""; });
        if (search) search.value = "";
        apply();
      }
      tests.forEach(function (x) { x.classList.remove("target"); });
      t.classList.add("target");
      open(t, true);
      scrollSettled(t);
    }

    tbl.addEventListener("click", function (ev) {
      if (ev.target.closest("a")) return;  // the deep link sets the hash; hashchange opens the test
      var row = ev.target.closest(".test > .row");
      if (row) open(row.parentNode, false);
    });
    filters.forEach(function (f) { f.el.addEventListener("change", apply); });
    if (search) search.addEventListener("input", apply);
    if (sort) sort.addEventListener("change", reorder);
    window.addEventListener("hashchange", openHash);
    apply();
    openHash();
    // The browser scrolls to the fragment's element itself once the page has loaded, under the
    // sticky controls: scroll again after it.
    window.addEventListener("load", function () {
      var t = tbl.querySelector(".test.target");
      if (t) requestAnimationFrame(function () { scrollSettled(t); });
    });
    return { apply: apply, reorder: reorder, open: open };
  }

  return { el: el, pre: pre, json: json, badge: badge, num: num, ms: ms, usd: usd, kv: kv, section: section,
    hooks: hooks, renderDetail: renderDetail, renderRun: renderRun, renderSignals: renderSignals, details: details, table: table };
})();
