/* The run report: one table of tests, details built when a test is opened. */
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
