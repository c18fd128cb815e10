// web/dashboard.js under node, with stand-ins for the DOM and Chart.js:
// user-chosen names that are also members of every JavaScript object
// ("toString", "constructor", "__proto__") are plain keys. Before, a
// pipeline named "toString" made every later poll throw (the page froze
// until reloaded), a model named "constructor" vanished from the charts,
// and one named "__proto__" set fields on Object.prototype.
//
//   node tests/integration/dashboard_names.js web/dashboard.js
"use strict";
const fs = require("fs"), vm = require("vm");
const src = fs.readFileSync(process.argv[2], "utf8");
const els = {};
const el = (id) => els[id] || (els[id] = { id, textContent: "", dataset: {}, rows: { length: 0 },
  children: [], insertBefore(c) { this.children.unshift(c); }, appendChild(c) { this.children.push(c); } });
class Chart { constructor() { this.data = { datasets: [] }; } update() {} }
const NAMES = ["toString", "constructor", "__proto__", "plain"];

function pipe(name, n) {
  const out = { ok: n, dropped: 0, infeasible: 0, rejected: 0, failed: 0 };
  return { name, slo_ms: 1000, requests: n, met: n, outcomes: out, p99_ms: 5, p99_total_ms: 5,
           accuracy_sum: 90 * n, accuracy_n: n,
           tasks: [{ name: "t", app: name, parent: null, requests: n, fanout: 0, dropped: 0,
                     outcomes: out, variants: [{ variant: name + "-v", requests: n, fanout: 0,
                                                 accuracy: 90 }] }] };
}
function poll(t, n) {
  const apps = Object.create(null); // "__proto__" an own key, as JSON.parse makes it
  for (const a of NAMES) apps[a] = { arrivals: n, served: n, instances: 1, cost_per_s: 1,
                                     accuracy: 90, p99_ms: 5, slo_attainment: 1 };
  return { t_s: t, t0_s: 0, le_ms: [1, 2, 5],
           variants: NAMES.map((m) => ({ model: m, variant: m + "-v", ok: n, failed: 0,
                                         slo_violations: 0, p99_ms: 1, lat_counts: [n, 0, 0, 0] })),
           instances: {}, pipelines: NAMES.map((p) => pipe(p, n)),
           control: { rows: [{ t_s: t, arrivals: n, served: n, late: 0, failed: 0,
                               slo_attainment: 1, p99_ms: 5, accuracy: 90, cost_per_s: 4,
                               instances: 4, cores: 4, variants: "", apps }], actions: [] } };
}
const queue = [poll(1, 10), poll(2, 30), poll(3, 60), poll(4, 100)];
const ctx = { Chart, console, Number, Math, JSON, Object, Date, Set, Array, String,
  document: { getElementById: el, createElement: () => ({ appendChild() {}, textContent: "" }) },
  fetch: async () => ({ ok: true, json: async () => JSON.parse(JSON.stringify(queue.shift())) }),
  setInterval: () => {} };
vm.createContext(ctx);
vm.runInContext(src, ctx);
const fail = (m) => { console.log("FAIL: " + m); process.exit(1); };
(async () => {
  for (let i = 0; i < 4; i++) {
    await new Promise((r) => setTimeout(r, 20));
    if (i > 0) await vm.runInContext("poll()", ctx);
    if (/no data|Error/.test(el("status").textContent)) fail(`poll ${i}: ${el("status").textContent}`);
  }
  const series = JSON.parse(vm.runInContext("JSON.stringify(seriesSummary())", ctx));
  for (const n of NAMES) {
    if (!series.c_rps || !series.c_rps.includes(n)) fail(`model ${n} missing from c_rps: ${series.c_rps}`);
    if (!series.c_patt || !series.c_patt.includes(n)) fail(`pipeline ${n} missing from c_patt`);
  }
  if (vm.runInContext("({}).ok !== undefined || ({}).lat !== undefined", ctx))
    fail("Object.prototype polluted");
  console.log("dashboard names: ok");
})();
