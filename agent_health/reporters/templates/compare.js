/* The comparison page: flips and deltas; a test whose status changed opens its two runs side by side. */
(function () {
  var el = AH.el;
  function side(title, r) {
    if (!r) return el("div", null, el("h3", { text: title }), el("div", { class: "empty", text: "not run on this side" }));
    return el("div", null, el("h3", { text: title + " \u00b7 " + r.agent }), AH.renderDetail(r));
  }
  AH.table({
    table: "tests",
    filters: [{ id: "f-flip", attr: "flip" }, { id: "f-suite", attr: "suite" }],
    search: "f-search",
    sort: "sort",
    count: "count",
    render: function (i) {
      if (i === "") return el("div", { class: "muted", text: "Same status on both sides: see the run reports for its details." });
      var d = AH.details(i);
      return el("div", { class: "sides" }, side("Baseline", d.baseline), side("Candidate", d.candidate));
    }
  });
})();
