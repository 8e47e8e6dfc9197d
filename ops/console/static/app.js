// The Relay console's page: plain DOM, no framework, no CDN. Every value is set as text (never as HTML).
"use strict";

const main = () => document.getElementById("main");
let info = { redriveAllowed: false };
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

async function api(path, options) {
  const response = await fetch(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = { error: `${response.status}: not JSON` }; }
  if (!response.ok) throw new Error(body && body.error ? body.error : `HTTP ${response.status}`);
  return body;
}

function post(path, document) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(document) });
}

const badge = (text) => el("span", { class: `badge ${text || ""}` }, text || "-");
const when = (iso) => (iso ? String(iso).replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z") : "-");
const kv = (k, v) => el("div", { class: "kv" }, el("span", { class: "k" }, k), el("span", { class: "v mono" }, v ?? "-"));
const short = (name) => String(name || "").replace(/^relay-[^-]+-/, "");
function showError(error) { return el("div", { class: "error", role: "alert" }, String(error.message || error)); }

function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.endsWith("#") ? "num" : "" }, h.replace(/#$/, ""))))),
    el("tbody", {}, rows));
}

// -- operations and orders ---------------------------------------------------------------------------

async function listPage(kind, query) {
  const title = kind === "operations" ? "Payment operations" : "Orders";
  const input = el("input", { type: "text", id: "search", class: "wide", name: "q", value: query || "",
    placeholder: "an id or a correlation id (empty: all, newest first)", "aria-label": "search" });
  const form = el("form", { class: "search", onsubmit: (e) => { e.preventDefault(); location.hash = `#/${kind}?q=${encodeURIComponent(input.value.trim())}`; } },
    input, el("button", { type: "submit", id: "search-button" }, "Search"));
  const body = el("div", {}, el("p", { class: "muted" }, "Loading…"));
  main().replaceChildren(el("h1", {}, title), form, body);
  try {
    const answer = await api(`/api/${kind}?q=${encodeURIComponent(query || "")}&limit=200`);
    const rows = answer[kind];
    const single = kind === "operations" ? "operation" : "order";
    if (!rows.length) { body.replaceChildren(el("p", { class: "muted", id: "no-results" }, `No ${kind}${query ? ` with id or correlation id ${query}` : ""}.`)); return; }
    body.replaceChildren(table(["id", "status", "version#", "correlation id", "created", "updated"],
      rows.map((r) => el("tr", { "data-id": r.id },
        el("td", {}, el("a", { href: `#/${single}/${encodeURIComponent(r.id)}`, class: "mono" }, r.id)),
        el("td", {}, badge(r.status)), el("td", { class: "num" }, r.version ?? "-"),
        el("td", { class: "mono" }, r.correlationId), el("td", {}, when(r.createdAt)), el("td", {}, when(r.updatedAt)))),
      { id: `${kind}-table` }));
  } catch (error) { body.replaceChildren(showError(error)); }
}

function parkedList(parked) {
  if (!parked || !parked.length) return el("p", { class: "muted" }, "None: nothing of it was parked.");
  return table(["status", "error class", "reason", "event", "parked at", "source queue", "redrive"],
    parked.map((p) => el("tr", { class: "parked-row" },
      el("td", {}, badge(p.status)), el("td", { class: "mono error-class" }, p.errorClass),
      el("td", { class: "error-message" }, p.errorMessage || "-"),
      el("td", { class: "mono" }, `${p.eventType || "?"} ${p.eventId || ""}`), el("td", {}, when(p.parkedAt)),
      el("td", { class: "mono" }, short(p.sourceQueue)),
      el("td", {}, p.redrivenAt ? `${when(p.redrivenAt)}: ${p.redriveReason || ""}` : "-"))));
}

function timelineOf(view, steps) {
  const entries = [];
  entries.push({ at: view.createdAt, cls: "", title: "accepted (202)", detail: `operation ${view.operationId || view.orderId}` });
  for (const s of steps) entries.push({ at: s.at, cls: "step", title: `${s.step ? s.step + " " : ""}${s.status}`, detail: "" });
  for (const e of view.outbox || []) {
    const where = e.inItem ? "in the item (published from the stream)" : e.publishedAt ? `published ${when(e.publishedAt)}` : "NOT published yet";
    entries.push({ at: e.createdAt, cls: "event", title: `event ${e.eventType}`, detail: `${e.eventId} — ${where}` });
  }
  for (const p of view.parked || []) entries.push({ at: p.parkedAt, cls: "parked", title: `PARKED: ${p.errorClass}`, detail: `${p.errorMessage || ""} (${p.status})` });
  entries.sort((a, b) => String(a.at).localeCompare(String(b.at)));
  return el("ol", { class: "timeline", id: "timeline" }, entries.map((e) => el("li", { class: e.cls },
    el("div", {}, el("strong", {}, e.title), " ", el("span", { class: "muted" }, when(e.at))),
    e.detail ? el("div", { class: "muted mono" }, e.detail) : null)));
}

async function operationPage(id) {
  main().replaceChildren(el("h1", {}, "Operation ", el("span", { class: "mono" }, id)), el("p", { class: "muted" }, "Loading…"));
  try {
    const v = await api(`/api/operations/${encodeURIComponent(id)}`);
    const d = v.deadline || {};
    main().replaceChildren(
      el("h1", {}, "Operation ", el("span", { class: "mono", id: "operation-id" }, v.operationId), " ", el("span", { id: "operation-status" }, badge(v.status))),
      el("div", { class: "card grid" },
        kv("correlation id", v.correlationId), kv("payment id", v.paymentId), kv("order id", v.orderId),
        kv("version", v.version), kv("created (202)", when(v.createdAt)), kv("updated", when(v.updatedAt)),
        kv("state since", when(v.stateSince)), kv("attempts", d.attempts ?? 0), kv("next attempt", when(d.nextAttemptAt)),
        kv("deadline", when(d.deadlineAt)), kv("redrives", d.redrives ?? 0), kv("expires", when(v.expiresAt))),
      el("h2", {}, "Partner calls"),
      el("div", { class: "card grid", id: "partner-calls" },
        kv("legacy payment", v.paymentRef ? `accepted: ${v.paymentRef}` : d.lastError ? `not yet: ${d.lastError}` : "not called yet"),
        kv("payment accepted at", when(v.paymentAcceptedAt)),
        kv("invoice", v.invoiceId ? `issued: ${v.invoiceId}` : "none yet"),
        kv("reconcile reason", v.reconcileReason), kv("last error", d.lastError),
        kv("error", v.error ? `${v.error.code}: ${v.error.message}` : null)),
      el("h2", {}, "Timeline"), timelineOf(v, v.steps || []),
      el("h2", {}, "Events written (outbox)"),
      (v.outbox || []).length ? table(["event type", "event id", "written", "published"], v.outbox.map((e) => el("tr", {},
        el("td", { class: "mono" }, e.eventType), el("td", { class: "mono" }, e.eventId), el("td", {}, when(e.createdAt)),
        el("td", {}, e.inItem ? "from the item, by the stream publisher" : when(e.publishedAt))))) : el("p", { class: "muted" }, "None."),
      el("h2", {}, "Parked messages (from the parked ledger: no receive)"), el("div", { id: "operation-parked" }, parkedList(v.parked)),
      el("h2", {}, "Claim checks"), el("pre", { class: "log" }, JSON.stringify(v.claimChecks || {}, null, 2)),
      el("h2", {}, "Trace"), traceSection(v.operationId),
      v.terminal ? null : el("h2", {}, "Replay"), v.terminal ? null : replayPanel(v));
  } catch (error) { main().append(showError(error)); }
}

// The operation's spans as the sandbox collected them (GET /api/operations/<id>/trace): one waterfall a
// trace, each span a row indented under its parent, its bar placed on the trace's own time axis.
function traceSection(id) {
  const box = el("div", { id: "operation-trace" }, el("p", { class: "muted" }, "Loading the trace…"));
  const refresh = el("button", { class: "secondary", id: "trace-refresh" }, "Reload the trace");
  const load = async () => {
    try {
      const t = await api(`/api/operations/${encodeURIComponent(id)}/trace`);
      if (!t.available) { box.replaceChildren(el("p", { class: "muted", id: "trace-elsewhere" }, t.note)); return; }
      if (!t.traces.length) { box.replaceChildren(el("p", { class: "muted", id: "trace-none" }, "No spans collected for this operation yet (a function exports its spans when its invocation ends).")); return; }
      box.replaceChildren(...t.traces.map(waterfall));
    } catch (error) { box.replaceChildren(showError(error)); }
  };
  refresh.addEventListener("click", load);
  load();
  return el("div", {}, box, refresh);
}

function waterfall(t) {
  const W = 420, total = Math.max(t.durationMs, 0.001);
  const rows = t.spans.map((s) => {
    const x = (W * s.offsetMs) / total, w = Math.max(2, (W * s.durationMs) / total);
    const bar = svg("svg", { width: W, height: 12, viewBox: `0 0 ${W} 12`, role: "img", "aria-label": `${s.durationMs} ms` },
      svg("rect", { x: x.toFixed(1), y: 2, width: w.toFixed(1), height: 8, rx: 2, fill: s.status === "ERROR" ? "#b42318" : "#2457c5" }));
    return el("tr", { class: "span", "data-function": s.function || "", "data-kind": s.kind },
      el("td", { class: "mono" }, "\u00a0\u00a0".repeat(s.depth), s.orphan ? "\u2026 " : "", s.name),
      el("td", { class: "mono" }, s.function || s.service || "-"), el("td", {}, s.kind.toLowerCase()),
      el("td", { class: "num" }, `${s.offsetMs.toFixed(1)}`), el("td", { class: "num" }, `${s.durationMs.toFixed(1)}`),
      el("td", {}, badge(s.status === "ERROR" ? "error" : s.status === "OK" ? "ok" : s.status)), el("td", {}, bar));
  });
  return el("div", { class: "card trace", "data-trace-id": t.traceId },
    el("div", {}, el("strong", {}, `trace ${t.traceId}`), el("span", { class: "muted" },
      ` — ${t.spans.length} spans, ${t.durationMs.toFixed(1)} ms, functions: ${t.functions.join(", ")}`)),
    table(["span", "function", "kind", "start ms#", "ms#", "status", "when"], rows, { class: "trace-table" }));
}

function replayPanel(v) {
  if (!info.replayAllowed) {
    return el("div", { class: "note", id: "replay-read-only" }, "This console is read-only. A replay of the current step needs the console started with --allow-redrive (or ",
      el("code", {}, `python -m ops replay ${v.operationId} --reason …`), ").");
  }
  const reason = el("input", { type: "text", id: "replay-reason", class: "wide", placeholder: "the root cause you fixed (audited)", "aria-label": "replay reason" });
  const force = el("input", { type: "checkbox", id: "replay-force" });
  const out = el("div", { id: "replay-output" });
  const confirmBox = el("input", { type: "checkbox", id: "replay-confirm-check", disabled: true });
  const start = el("button", { class: "danger", id: "replay-start", disabled: true }, "Confirm: replay");
  let token = null;
  const reset = () => { token = null; confirmBox.checked = false; confirmBox.disabled = true; start.disabled = true; };
  reason.addEventListener("input", reset); force.addEventListener("change", reset);
  confirmBox.addEventListener("change", () => { start.disabled = !(confirmBox.checked && token); });
  const dry = el("button", { id: "replay-dry-run" }, "Dry run");
  dry.addEventListener("click", async () => {
    reset();
    try {
      const r = await post("/api/replay/dry-run", { operationId: v.operationId, reason: reason.value, force: force.checked });
      token = r.confirm; confirmBox.disabled = false;
      out.replaceChildren(el("div", { class: "card", id: "replay-plan" }, el("strong", {}, `Would ${r.would}.`),
        el("div", { class: "muted" }, `status ${r.status}, version ${r.version}, attempts ${r.attempts}, next attempt ${when(r.nextAttemptAt)}, redrives ${r.redrives}`)));
    } catch (error) { out.replaceChildren(showError(error)); }
  });
  start.addEventListener("click", async () => {
    start.disabled = true; confirmBox.disabled = true;
    try {
      const record = await post("/api/replay", { operationId: v.operationId, reason: reason.value, force: force.checked, confirm: token });
      token = null;
      out.replaceChildren(el("div", { class: "card", id: "replay-record" }, el("strong", {}, record.replayed ? "Replayed" : "Nothing written"),
        el("pre", { class: "log" }, JSON.stringify(record, null, 2))));
    } catch (error) { out.append(showError(error)); }
  });
  return el("div", { class: "card", id: "replay-panel" },
    el("p", {}, "Re-drives the current step through the outbox with the sweeper's own code, as ", el("code", {}, "python -m ops replay"), " does: the same idempotency keys, so no second charge or invoice. A dry run makes the replay's checks first."),
    el("div", { class: "search" }, el("label", {}, "Reason ", reason), el("label", {}, force, " force (a next attempt is scheduled)")),
    el("div", { class: "search" }, dry, el("label", {}, confirmBox, " I have read the dry run: replay"), start),
    out);
}

async function orderPage(id) {
  main().replaceChildren(el("h1", {}, "Order ", el("span", { class: "mono" }, id)), el("p", { class: "muted" }, "Loading…"));
  try {
    const v = await api(`/api/orders/${encodeURIComponent(id)}`);
    main().replaceChildren(
      el("h1", {}, "Order ", el("span", { class: "mono" }, v.orderId), " ", badge(v.status)),
      el("div", { class: "card grid" }, kv("correlation id", v.correlationId), kv("customer", v.customerId), kv("version", v.version),
        kv("created", when(v.createdAt)), kv("updated", when(v.updatedAt)), kv("stock", v.stock),
        kv("payment operation", v.paymentOperationId), kv("shipment", v.shipment ? JSON.stringify(v.shipment) : null),
        kv("rejection", v.rejection ? JSON.stringify(v.rejection) : null), kv("cancellation", v.cancellation ? JSON.stringify(v.cancellation) : null)),
      v.paymentOperationId ? el("p", {}, el("a", { href: `#/operation/${encodeURIComponent(v.paymentOperationId)}` }, "its payment operation →")) : null,
      el("h2", {}, "Timeline"), timelineOf({ ...v, outbox: [] }, v.history || []),
      el("h2", {}, "Lines"), table(["sku", "quantity#"], (v.items || []).map((i) => el("tr", {}, el("td", { class: "mono" }, i.sku), el("td", { class: "num" }, i.quantity)))),
      el("h2", {}, "Orphan payments"), el("pre", { class: "log" }, JSON.stringify(v.orphanPayments || [], null, 2)),
      el("h2", {}, "Parked messages (from the parked ledger)"), parkedList(v.parked));
  } catch (error) { main().append(showError(error)); }
}

// -- queues, DLQs, redrive ------------------------------------------------------------------------

const age = (q) => (q.oldestAgeSeconds === null || q.oldestAgeSeconds === undefined ? (q.oldestAgeNote || "-") : `${Math.round(q.oldestAgeSeconds)} s`);

async function queuesPage() {
  main().replaceChildren(el("h1", {}, "Queues & DLQs"), el("p", { class: "muted" }, "Loading…"));
  try {
    const s = await api("/api/queues");
    const queueRows = s.queues.map((q) => el("tr", { "data-queue": q.short },
      el("td", { class: "mono" }, q.short), el("td", { class: "num" }, q.visible), el("td", { class: "num" }, q.inFlight),
      el("td", { class: "num" }, q.delayed), el("td", {}, age(q)), el("td", { class: "mono" }, short(q.dlq))));
    const dlqRows = s.dlqs.map((q) => el("tr", { "data-dlq": q.short },
      el("td", { class: "mono" }, el("a", { href: `#/dlq/${encodeURIComponent(q.short)}` }, q.short)),
      el("td", { class: "num depth" }, q.visible + q.inFlight), el("td", {}, age(q)),
      el("td", {}, (q.parked || []).filter((p) => p.status === "PARKED").length),
      el("td", {}, (q.visible + q.inFlight) ? el("a", { href: `#/dlq/${encodeURIComponent(q.short)}`, class: "redrive-link" }, info.redriveAllowed ? "parked · redrive →" : "parked →") : "-")));
    main().replaceChildren(el("h1", {}, "Queues & DLQs"),
      el("p", { class: "muted" }, `${s.prefix} — taken ${when(s.takenAt)} from queue attributes (ops status): nothing received.`),
      ...(s.notes || []).map((n) => el("div", { class: "note" }, n)),
      el("h2", {}, `Queues (${s.queues.length})`), table(["queue", "visible#", "in flight#", "delayed#", "oldest message", "DLQ"], queueRows, { id: "queues-table" }),
      el("h2", {}, `DLQs (${s.dlqs.length})`), table(["DLQ", "depth#", "oldest message", "parked (ledger)", ""], dlqRows, { id: "dlqs-table" }));
  } catch (error) { main().append(showError(error)); }
}

async function dlqPage(name) {
  main().replaceChildren(el("h1", {}, "DLQ ", el("span", { class: "mono" }, name)), el("p", { class: "muted" }, "Loading…"));
  let d;
  try { d = await api(`/api/queues/${encodeURIComponent(name)}/parked`); } catch (error) { main().append(showError(error)); return; }
  const parkedNow = d.parked.filter((p) => p.status === "PARKED");
  main().replaceChildren(
    el("h1", {}, "DLQ ", el("span", { class: "mono" }, d.short)),
    el("div", { class: "card grid" }, kv("depth", el("span", { id: "dlq-depth" }, d.visible + d.inFlight)), kv("visible", d.visible),
      kv("in flight", d.inFlight), kv("parks from", d.sources.map(short).join(", ") || "-")),
    el("h2", {}, `Parked messages (${parkedNow.length} parked, ${d.parked.length - parkedNow.length} redriven) — from the parked ledger, no receive`),
    el("div", { id: "dlq-parked" }, parkedList(d.parked)),
    el("h2", {}, "Redrive"), redrivePanel(d));
}

function redrivePanel(d) {
  if (!info.redriveAllowed) {
    return el("div", { class: "note", id: "read-only" }, "This console is read-only. A redrive (its dry run included, which receives every message) needs the console started with --allow-redrive: ",
      el("code", {}, "python -m ops console --local --allow-redrive"), " or ", el("code", {}, "make local LOCAL_ARGS=--console-allow-redrive"), ".");
  }
  const reason = el("input", { type: "text", id: "redrive-reason", class: "wide", placeholder: "why: the fix that was deployed (audited)", "aria-label": "reason" });
  const first = el("input", { type: "number", id: "redrive-first", value: "5", min: "1", max: "100", "aria-label": "first batch" });
  const rate = el("input", { type: "number", id: "redrive-rate", min: "1", max: "500", placeholder: "SQS's pace", "aria-label": "rate" });
  const out = el("div", { id: "redrive-output" });
  const confirmBox = el("input", { type: "checkbox", id: "redrive-confirm-check", disabled: true });
  const start = el("button", { class: "danger", id: "redrive-start", disabled: true }, "Confirm: redrive");
  const abort = el("button", { class: "secondary", id: "redrive-abort", disabled: true }, "Abort");
  let token = null; let job = null;
  const dry = el("button", { id: "redrive-dry-run" }, "Dry run");
  reason.addEventListener("input", () => { token = null; confirmBox.checked = false; confirmBox.disabled = true; start.disabled = true; });
  confirmBox.addEventListener("change", () => { start.disabled = !(confirmBox.checked && token); });
  dry.addEventListener("click", async () => {
    dry.disabled = true; out.replaceChildren(el("p", { class: "muted" }, "Dry run: reading every message of the DLQ (receive counts go up by one)…"));
    try {
      const r = await post("/api/redrive/dry-run", { dlq: d.name, reason: reason.value });
      token = r.confirm;
      out.replaceChildren(el("div", { class: "card", id: "dry-run-result" },
        el("strong", {}, `Dry run: ${r.counts.wouldMove ?? 0} message(s) would move to ${r.destination || "their source queues"}`),
        el("pre", { class: "log" }, r.lines.join("\n"))));
      confirmBox.disabled = !token;
    } catch (error) { out.replaceChildren(showError(error)); }
    dry.disabled = false;
  });
  start.addEventListener("click", async () => {
    start.disabled = true; confirmBox.disabled = true; dry.disabled = true;
    const log = el("pre", { class: "log", id: "redrive-log" }, "starting…");
    const state = el("span", { id: "redrive-state" }, badge("running"));
    out.replaceChildren(el("div", { class: "card" }, el("strong", {}, "Redrive "), state, log));
    try {
      job = await post("/api/redrive", { dlq: d.name, reason: reason.value, confirm: token, first: first.value, rate: rate.value || null });
      abort.disabled = false;
      abort.onclick = async () => { abort.disabled = true; try { await post(`/api/redrive/jobs/${job.id}/abort`, {}); } catch (error) { out.append(showError(error)); } };
      const poll = async () => {
        const j = await api(`/api/redrive/jobs/${job.id}`);
        log.textContent = j.lines.join("\n");
        state.replaceChildren(badge(j.state));
        if (j.state === "running") { setTimeout(poll, 1000); } else { abort.disabled = true; token = null; dry.disabled = false; }
      };
      poll();
    } catch (error) { out.append(showError(error)); dry.disabled = false; }
  });
  return el("div", { class: "card", id: "redrive-panel" },
    el("p", {}, "1. A dry run counts what would move (it receives every message, as ", el("code", {}, "ops dlq redrive --dry-run"), " does). ",
      "2. Confirm: the first batch is moved and verified (drained, none parked again, the business checks pass), then the rest by SQS's move task. Every run is audited."),
    el("div", { class: "search" }, el("label", {}, "Reason ", reason)),
    el("div", { class: "search" }, el("label", {}, "First batch ", first), el("label", {}, " Rate/s ", rate)),
    el("div", { class: "search" }, dry, el("label", {}, confirmBox, " I have read the dry run: move these messages"), start, abort),
    out);
}

// -- alarms ---------------------------------------------------------------------------------------------

async function alarmsPage() {
  main().replaceChildren(el("h1", {}, "Alarms"), el("p", { class: "muted" }, "Loading…"));
  try {
    const a = await api("/api/alarms");
    const stateClass = (s) => (s === "ALARM" ? "bad" : s === "OK" ? "ok" : "warn");
    main().replaceChildren(el("h1", {}, "Alarms"),
      el("p", { class: "muted" }, `${a.alarms.length} alarm(s), those in ALARM first, as python -m ops status lists them — taken ${when(a.takenAt)}. Each description is its runbook entry; more in `, el("code", {}, a.runbook || "docs/ops.md"), "."),
      a.declaredOnly ? el("div", { class: "note" }, `${a.declaredOnly} alarm(s) declared in cdk.out only: this emulator holds none, so none can fire.`) : null,
      table(["state", "alarm", "since", "runbook", "description"], a.alarms.map((x) => el("tr", { "data-alarm": x.name, "data-state": x.state || "" },
        el("td", { class: "alarm-state" }, el("span", { class: `badge ${stateClass(x.state)}` }, x.state || "n/a")),
        el("td", { class: "mono" }, short(x.name)), el("td", {}, when(x.since)),
        el("td", { class: "mono runbook" }, (x.runbook || []).map((c) => el("div", {}, c))),
        el("td", { class: "muted" }, x.description || x.reason || "-"))), { id: "alarms-table" }));
  } catch (error) { main().append(showError(error)); }
}

// -- IAM, meter ----------------------------------------------------------------------------------------

async function iamPage() {
  main().replaceChildren(el("h1", {}, "IAM report"), el("p", { class: "muted" }, "Loading…"));
  try {
    const r = await api("/api/iam");
    main().replaceChildren(el("h1", {}, "IAM report"), el("p", { id: "iam-summary" }, r.summary),
      table(["caller", "calls allowed#", "grants used#", "denied", "grants never used"], r.functions.map((f) => el("tr", {},
        el("td", { class: "mono" }, short(f.function)), el("td", { class: "num" }, f.allowed), el("td", { class: "num" }, f.used),
        el("td", { class: "mono" }, Object.entries(f.denied).map(([call, n]) => el("div", { class: "badge bad" }, `×${n} ${call}`))),
        el("td", { class: "mono" }, f.unused.map((g) => el("div", {}, `${g.action} ${short(g.resource.split(":").pop())}`))))), { id: "iam-table" }));
  } catch (error) { main().append(showError(error)); }
}

const usd = (x) => (x === null || x === undefined ? "-" : `$${x >= 0.01 || x === 0 ? x.toFixed(4) : x.toPrecision(3)}`);

async function meterPage() {
  main().replaceChildren(el("h1", {}, "Request meter"), el("p", { class: "muted" }, "Loading…"));
  try {
    const m = await api("/api/meter");
    main().replaceChildren(el("h1", {}, "Request meter"),
      el("div", { class: "card grid", id: "meter-summary" }, kv("operations so far", m.operations), kv("total", usd(m.totalUsd)),
        kv("per operation", usd(m.usdPerOperation)), kv("per 1M operations", m.usdPerMillionOperations === null ? "-" : `$${m.usdPerMillionOperations.toFixed(2)}`)),
      el("p", { class: "muted" }, m.note),
      table(["line", "requests#", "$#"], m.lines.map((l) => el("tr", {}, el("td", {}, l.line), el("td", { class: "num" }, l.requests), el("td", { class: "num" }, usd(l.usd)))), { id: "meter-table" }));
  } catch (error) { main().append(showError(error)); }
}

// -- charts (inline SVG) ---------------------------------------------------------------------------

const PALETTE = ["#2457c5", "#1b7f3b", "#b42318", "#a86400", "#7a3fb0", "#0f8a8a", "#c2417a", "#59606b", "#3d8bfd", "#8a6d00"];

function lineChart(id, samples, seriesOf, title) {
  const W = 900, H = 220, L = 44, R = 10, T = 10, B = 24;
  // Only the series that were ever above zero: forty idle queues would hide the two that moved.
  const names = [...new Set(samples.flatMap((s) => Object.entries(seriesOf(s)).filter(([, v]) => v > 0).map(([k]) => k)))].sort();
  const max = Math.max(1, ...samples.flatMap((s) => Object.values(seriesOf(s))));
  const x = (i) => L + (samples.length < 2 ? 0 : (i * (W - L - R)) / (samples.length - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const chart = svg("svg", { id, viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": title });
  for (const f of [0, 0.5, 1]) {
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), stroke: "#d9dde3" }));
    chart.append(svg("text", { x: L - 6, y: y(max * f) + 4, "text-anchor": "end" }, Math.round(max * f)));
  }
  if (samples.length) {
    chart.append(svg("text", { x: L, y: H - 6 }, when(samples[0].at)));
    chart.append(svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, when(samples[samples.length - 1].at)));
  }
  names.forEach((name, n) => {
    const points = samples.map((s, i) => `${x(i).toFixed(1)},${y(seriesOf(s)[name] || 0).toFixed(1)}`).join(" ");
    chart.append(svg("polyline", { points, fill: "none", stroke: PALETTE[n % PALETTE.length], "stroke-width": 2, "data-series": name }));
  });
  const legend = el("div", { class: "legend" }, names.map((name, n) => el("span", {},
    svg("svg", { width: 10, height: 10 }, svg("rect", { width: 10, height: 10, fill: PALETTE[n % PALETTE.length] })), " ", short(name))));
  return el("div", { class: "card" }, el("strong", {}, title), chart, legend);
}

function barChart(id, latency) {
  const W = 900, H = 220, L = 44, T = 10, B = 30;
  const max = Math.max(1, ...latency.buckets.map((b) => b.count));
  const w = (W - L - 10) / latency.buckets.length;
  const chart = svg("svg", { id, viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": "latency" });
  latency.buckets.forEach((b, i) => {
    const h = ((H - T - B) * b.count) / max;
    chart.append(svg("rect", { x: L + i * w + 4, y: H - B - h, width: w - 8, height: h, fill: "#2457c5", "data-count": b.count }));
    chart.append(svg("text", { x: L + i * w + w / 2, y: H - 12, "text-anchor": "middle" }, b.label));
    if (b.count) chart.append(svg("text", { x: L + i * w + w / 2, y: H - B - h - 4, "text-anchor": "middle" }, b.count));
  });
  const fmt = (s) => (s === null || s === undefined ? "-" : `${s.toFixed(1)} s`);
  return el("div", { class: "card" }, el("strong", {}, "Latency from the 202 to a terminal state"),
    el("span", { class: "muted" }, ` — ${latency.count} terminal operation(s); p50 ${fmt(latency.p50)}, p95 ${fmt(latency.p95)}, max ${fmt(latency.max)}`), chart);
}

async function chartsPage() {
  main().replaceChildren(el("h1", {}, "Charts"), el("p", { class: "muted" }, "Loading…"));
  try {
    const c = await api("/api/charts");
    main().replaceChildren(el("h1", {}, "Charts"),
      el("p", { class: "muted" }, `${c.samples.length} sample(s), taken every few seconds since the console started; refreshes every 5 s.`),
      lineChart("chart-states", c.samples, (s) => s.states, "Payment operations per state"),
      lineChart("chart-depths", c.samples, (s) => s.depths, "Queue depth (visible + in flight + delayed)"),
      barChart("chart-latency", c.latency));
    timer = setTimeout(() => { if (location.hash.startsWith("#/charts")) chartsPage(); }, 5000);
  } catch (error) { main().append(showError(error)); }
}

// -- routing -------------------------------------------------------------------------------------------

function route() {
  if (timer) { clearTimeout(timer); timer = null; }
  const hash = location.hash || "#/operations";
  const [path, search] = hash.slice(2).split("?");
  const parts = path.split("/").map(decodeURIComponent);
  const q = new URLSearchParams(search || "").get("q") || "";
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === parts[0]);
  switch (parts[0]) {
    case "operations": return listPage("operations", q);
    case "orders": return listPage("orders", q);
    case "operation": return operationPage(parts[1]);
    case "order": return orderPage(parts[1]);
    case "queues": return queuesPage();
    case "dlq": return dlqPage(parts[1]);
    case "alarms": return alarmsPage();
    case "iam": return iamPage();
    case "meter": return meterPage();
    case "charts": return chartsPage();
    default: main().replaceChildren(showError(new Error(`no page ${hash}`)));
  }
}

async function start() {
  try {
    info = await api("/api/info");
    document.getElementById("stage").textContent = `${info.prefix}${info.local ? " (sandbox)" : ""}`;
    const mode = document.getElementById("mode");
    mode.textContent = info.redriveAllowed ? "redrive allowed" : "read-only";
    mode.id = "mode"; mode.classList.toggle("write", info.redriveAllowed);
  } catch (error) { main().replaceChildren(showError(error)); return; }
  window.addEventListener("hashchange", route);
  route();
}

start();
