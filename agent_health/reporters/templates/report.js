/* The run report: one table of tests, details built when a test is opened. */
/* Human labels of verdicts: a pass/fail control and a note on each graded verdict; "export labels"
   downloads them as the labels file `agent-health calibrate --labels` reads (docs/judges.md). */
var LABELS = {};
function labelCount() {
  var n = document.getElementById("label-count");
  if (n) n.textContent = String(Object.keys(LABELS).length);
}
AH.hooks.verdict = function (sig, d) {
  if (sig.passed === null || sig.passed === undefined) return null;  // skipped or errored: nothing to label
  var key = [d.test_id, d.agent, d.eval_run_id || "", sig.criterion || "", sig.judge_key || ""].join("\u0000");
  var pass = document.createElement("button");
  var fail = document.createElement("button");
  var note = document.createElement("input");
  pass.type = fail.type = "button";
  pass.className = "label-pass";
  fail.className = "label-fail";
  pass.textContent = "human: pass";
  fail.textContent = "human: fail";
  note.type = "text";
  note.className = "label-note";
  note.placeholder = "why (note)";
  function mark() {
    var chosen = LABELS[key] && LABELS[key].label;
    pass.classList.toggle("chosen", chosen === "pass");
    fail.classList.toggle("chosen", chosen === "fail");
  }
  function choose(value) {
    var label = { test_id: d.test_id, agent: d.agent, criterion: sig.criterion, judge: sig.judge_key, label: value };
    if (d.eval_run_id) label.run_id = d.eval_run_id;
    if (note.value) label.note = note.value;
    LABELS[key] = label;
    mark();
    labelCount();
  }
  pass.addEventListener("click", function () { choose("pass"); });
  fail.addEventListener("click", function () { choose("fail"); });
  note.addEventListener("input", function () {
    if (!LABELS[key]) return;
    if (note.value) LABELS[key].note = note.value; else delete LABELS[key].note;
  });
  if (LABELS[key]) note.value = LABELS[key].note || "";
  mark();
  var box = document.createElement("div");
  box.className = "label-control";
  box.append("label this verdict: ", pass, " ", fail, " ", note);
  return box;
};
/* The labels as JSON lines, each with the labeller when one is given. */
AH.exportLabels = function () {
  var who = (document.getElementById("labeller") || {}).value || "";
  return Object.keys(LABELS).map(function (k) {
    var row = Object.assign({}, LABELS[k]);
    if (who) row.labeller = who;
    return JSON.stringify(row) + "\n";
  }).join("");
};
(function () {
  var button = document.getElementById("export-labels");
  if (!button) return;
  button.addEventListener("click", function () {
    var a = document.createElement("a");
    a.href = "data:application/x-ndjson;charset=utf-8," + encodeURIComponent(AH.exportLabels());
    a.download = "labels.jsonl";
    document.body.append(a);
    a.click();
    a.remove();
  });
})();
AH.table({
  table: "tests",
  filters: [
    { id: "f-status", attr: "status" },
    { id: "f-suite", attr: "suite" },
    { id: "f-agent", attr: "agent" },
    { id: "f-label", attr: "labels", list: true }
  ],
  search: "f-search",
  sort: "sort",
  count: "count",
  render: function (i) { return AH.renderDetail(AH.details(i)); }
});
