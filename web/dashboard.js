// Vario live dashboard: polls /v2/dashboard/data once a second and feeds
// Chart.js line charts. Three sources, whichever the server has: the
// control plane's per-period rows (model-less serving: per app requests/s,
// SLO attainment, p99, accuracy, cost, instances, autoscaler actions), the
// pipelines' cumulative counters (per pipeline requests/s, drops/s,
// end-to-end attainment and p99; per task the variants serving, fan-out,
// drops) and the runtime's cumulative per-variant counters (any server:
// requests/s and p99 per model).
"use strict";
const WINDOW = 300; // points kept per series (5 min at 1 s)
// Maps keyed by user-chosen names (models, variants, apps, pipelines):
// without a prototype, so a name like "toString", "constructor" or
// "__proto__" is a key like any other, not an inherited member.
const dict = () => Object.create(null);
const charts = {};
const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
let since = -1, polls = 0, points = 0, prev = null, prevPipes = null, maxRps = 0;
let lastApps = dict(); // the newest control row's per-app block (pipeline cost)

function chart(id, stacked) {
  const c = new Chart(document.getElementById(id), {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      parsing: false, normalized: true,
      scales: { x: { type: "linear", title: { display: true, text: "t (s)" } },
                y: { beginAtZero: true, stacked: !!stacked } },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 10 } } },
      elements: { point: { radius: 0 }, line: { borderWidth: 1.5 } },
    },
  });
  charts[id] = c;
  return c;
}

function push(id, label, x, y) {
  if (!Number.isFinite(y)) return;
  const c = charts[id];
  let ds = c.data.datasets.find((d) => d.label === label);
  if (!ds) {
    const col = palette[c.data.datasets.length % palette.length];
    ds = { label, data: [], borderColor: col, backgroundColor: col, fill: false };
    c.data.datasets.push(ds);
  }
  ds.data.push({ x, y });
  if (id === "c_rps") maxRps = Math.max(maxRps, y);
  if (ds.data.length > WINDOW) ds.data.shift();
  points++;
}

function controlRows(ctl) {
  for (const r of ctl.rows) {
    const t = r.t_s;
    const apps = Object.keys(r.apps || {});
    for (const a of apps) {
      push("c_rps", a, t, r.apps[a].served);
      push("c_cost", a, t, r.apps[a].cost_per_s * 3600);
      // each app against its own requests' SLOs, not pooled over apps; a
      // period that served nothing has no accuracy, attainment or p99 (a
      // gap, not a 0)
      if (r.apps[a].served > 0) {
        push("c_acc", a, t, r.apps[a].accuracy);
        push("c_slo", a, t, 100 * r.apps[a].slo_attainment);
        if (r.apps[a].p99_ms !== null) push("c_p99", a, t, r.apps[a].p99_ms);
      }
    }
    if (!apps.length) {
      push("c_rps", "all", t, r.served);
      push("c_slo", "all", t, 100 * r.slo_attainment);
      push("c_p99", "all", t, r.p99_ms);
    }
    const inst = dict();
    for (const tok of (r.variants || "").split(" ").filter(Boolean)) {
      const i = tok.lastIndexOf("*");
      inst[tok.slice(0, i)] = Number(tok.slice(i + 1));
    }
    for (const ds of charts.c_inst.data.datasets) if (!(ds.label in inst)) inst[ds.label] = 0;
    for (const v of Object.keys(inst)) push("c_inst", v, t, inst[v]);
    document.getElementById("variants").textContent = r.variants || "(none loaded)";
    lastApps = Object.assign(dict(), r.apps || {});
    since = Math.max(since, t);
  }
  const tb = document.getElementById("actions");
  for (const a of ctl.actions) {
    const tr = document.createElement("tr");
    for (const v of [a.t_s.toFixed(1), a.kind, a.variant, a.why]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    tb.insertBefore(tr, tb.firstChild);
  }
}

// q-quantile of a histogram given as per-bucket counts over the bounds le
// (ms; one more bucket past the last is +Inf), interpolated linearly inside
// the bucket as Prometheus' histogram_quantile does.
function bucketQuantile(counts, le, q) {
  const n = counts.reduce((a, x) => a + x, 0);
  if (n <= 0) return NaN;
  let rank = q * n, lo = 0;
  for (let i = 0; i < counts.length; i++) {
    const hi = i < le.length ? le[i] : le[le.length - 1];
    if (rank <= counts[i]) return counts[i] ? lo + (hi - lo) * (rank / counts[i]) : hi;
    rank -= counts[i];
    lo = hi;
  }
  return le[le.length - 1];
}

// Runtime counters are cumulative: rates (and the live p99, from the
// latency buckets) are differences between polls.
function modelRows(d) {
  const by = dict();
  for (const v of d.variants) {
    const m = (by[v.model] = by[v.model] || { ok: 0, late: 0, lat: null });
    m.ok += v.ok;
    m.late += v.slo_violations;
    const c = v.lat_counts || [];
    m.lat = m.lat ? m.lat.map((x, i) => x + (c[i] || 0)) : c.slice();
  }
  if (prev) {
    const dt = d.t_s - prev.t_s;
    for (const m of Object.keys(by)) {
      const p = prev.by[m] || { ok: 0, late: 0 };
      const done = by[m].ok - p.ok;
      if (!d.control && dt > 0) push("c_rps", m, d.t_s - d.t0_s, done / dt);
      if (!d.control && done > 0) push("c_slo", m, d.t_s - d.t0_s, 100 * (1 - (by[m].late - p.late) / done));
      if (!d.control && done > 0 && by[m].lat && p.lat) {
        const delta = by[m].lat.map((x, i) => x - (p.lat[i] || 0));
        push("c_p99", m, d.t_s - d.t0_s, bucketQuantile(delta, d.le_ms || [], 0.99));
      }
    }
  }
  if (!d.control) {
    const inst = d.instances || {};
    for (const v of Object.keys(inst)) push("c_inst", v, d.t_s - d.t0_s, inst[v]);
    document.getElementById("variants").textContent =
      Object.keys(inst).map((v) => v + " ×" + inst[v]).join("\n") || "(none loaded)";
  }
  prev = { t_s: d.t_s, by };
}

// Pipelines: counters are cumulative; rates and attainment are per poll.
function pipeRows(d) {
  const t = d.t_s - d.t0_s, cur = dict();
  const rows = [];
  for (const p of d.pipelines || []) {
    cur[p.name] = p;
    const q = prevPipes && prevPipes.by[p.name];
    const dt = prevPipes ? d.t_s - prevPipes.t_s : 0;
    if (p.p99_ms !== null) push("c_pp99", p.name, t, p.p99_ms);
    if (!q || dt <= 0) continue;
    const n = p.requests - q.requests;
    const drops = p.outcomes.dropped - q.outcomes.dropped;
    push("c_prps", p.name + " requests", t, n / dt);
    push("c_prps", p.name + " dropped", t, drops / dt);
    if (n > 0) push("c_patt", p.name, t, 100 * (p.met - q.met) / n);
    // a pipeline in the per-app charts: its end-to-end accuracy served,
    // and the cost of the apps its tasks run on (shared with their own
    // direct traffic, if any)
    const na = p.accuracy_n - q.accuracy_n;
    if (na > 0) push("c_acc", p.name + " (pipeline)", t, (p.accuracy_sum - q.accuracy_sum) / na);
    const apps = [...new Set(p.tasks.map((k) => k.app))].filter((a) => a in lastApps);
    if (apps.length)
      push("c_cost", p.name + " (pipeline)", t, 3600 * apps.reduce((s, a) => s + lastApps[a].cost_per_s, 0));
    p.tasks.forEach((k, i) => {
      const o = q.tasks[i] || { requests: 0, fanout: 0, dropped: 0, variants: [] };
      const was = dict();
      for (const v of o.variants) was[v.variant] = v;
      const served = k.variants.map((v) => ({ v, n: v.requests - (was[v.variant] || { requests: 0 }).requests,
                                              f: v.fanout - (was[v.variant] || { fanout: 0 }).fanout }));
      const sum = served.reduce((a, x) => a + x.n, 0);
      const now = served.filter((x) => x.n > 0).sort((a, b) => b.n - a.n)
        .map((x) => `${x.v.variant} ${Math.round(100 * x.n / sum)}%` +
             (x.v.accuracy !== null ? ` (${x.v.accuracy.toFixed(1)})` : "")).join(", ");
      const fan = sum > 0 ? (served.reduce((a, x) => a + x.f, 0) / sum).toFixed(2) : "–";
      rows.push([(i ? "  " + k.name : p.name + " / " + k.name),
                 ((k.requests - o.requests) / dt).toFixed(1), now || "–",
                 fan, ((k.dropped - o.dropped) / dt).toFixed(1)]);
    });
  }
  if (rows.length) {
    const tb = document.getElementById("pipes");
    tb.textContent = "";
    for (const r of rows) {
      const tr = document.createElement("tr");
      for (const v of r) {
        const td = document.createElement("td");
        td.textContent = v;
        tr.appendChild(td);
      }
      tb.appendChild(tr);
    }
  }
  prevPipes = { t_s: d.t_s, by: cur };
}

// What each chart has received, for tests and for a glance at the page.
function seriesSummary() {
  const out = {};
  for (const [id, c] of Object.entries(charts))
    out[id] = c.data.datasets.filter((ds) => ds.data.length > 0).map((ds) => ds.label);
  return out;
}

async function poll() {
  try {
    const r = await fetch("/v2/dashboard/data?since=" + since, { cache: "no-store" });
    const d = await r.json();
    if (d.control) controlRows(d.control);
    modelRows(d);
    pipeRows(d);
    for (const c of Object.values(charts)) c.update("none");
    polls++;
    const st = document.getElementById("status");
    st.dataset.polls = polls;
    st.dataset.points = points;
    st.dataset.maxRps = maxRps.toFixed(1);
    st.dataset.series = JSON.stringify(seriesSummary());
    st.dataset.pipeRows = document.getElementById("pipes").rows.length;
    st.textContent = `updated ${new Date().toLocaleTimeString()} — ${polls} polls, ${points} points` +
      (d.control ? " (model-less control plane)" : " (model repository)");
  } catch (e) {
    document.getElementById("status").textContent = "no data: " + e;
  }
}

for (const id of ["c_rps", "c_slo", "c_p99", "c_acc", "c_cost", "c_prps", "c_patt", "c_pp99"]) chart(id);
chart("c_inst", true);
poll();
setInterval(poll, 1000);
