// The Navique approvals page. It renders the snapshots the server streams
// (server-sent events from its watches) and sends approvals back. Every
// value from the cluster is set as text, never as HTML.
"use strict";

let snapshot = null;
// Outcomes of approvals, by row key, kept across snapshots.
const results = new Map();
// Previews of deletes, by object key, kept across snapshots.
const previews = new Map();
// The Stack and the exact list the open confirmation shows.
let confirming = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function qualifiedKind(r) {
  return r.group ? `${r.kind}.${r.group}` : r.kind;
}

function rowKey(row) {
  const r = row.resource;
  return [row.stack.namespace, row.stack.name, r.group, r.kind, r.namespace || "", r.name].join("/");
}

function item(row) {
  const r = row.resource;
  return { group: r.group, kind: r.kind, namespace: r.namespace, name: r.name, uid: row.uid };
}

function since(text) {
  if (!text) return "—";
  const at = new Date(text);
  const minutes = Math.round((Date.now() - at.getTime()) / 60000);
  const ago = minutes < 1 ? "just now" : minutes < 120 ? `${minutes} min ago` : `${Math.round(minutes / 60)} h ago`;
  return `${at.toLocaleString()} (${ago})`;
}

function panelState(panel, body) {
  body.replaceChildren();
  if (panel.error) body.append(el("p", { class: "error panel-error" }, panel.error));
  if (!panel.synced && !panel.error) body.append(el("p", { class: "muted" }, "Loading…"));
  return panel.synced;
}

function resultNode(key) {
  const r = results.get(key);
  if (!r) return null;
  if (r.approved) return el("span", { class: "result ok" }, "approved");
  return el("span", { class: "result error" }, r.error || "not approved");
}

function renderApprovals() {
  const body = $("approvals-body");
  const panel = snapshot.stacks;
  if (!panelState(panel, body)) return;
  for (const u of snapshot.unreadable || []) body.append(el("p", { class: "error" }, `Stack ${u.label}: ${u.value}`));
  if (panel.items.length === 0) {
    body.append(el("p", { class: "muted", id: "no-approvals" }, "No approvals pending."));
    return;
  }
  for (const view of panel.items) {
    const path = [...(view.parents || []), view.stack.name].join(" › ");
    const head = el("div", { class: "stack-head" },
      el("h3", {}, `Stack ${view.stack.namespace}/${path}`));
    for (const s of view.settings || []) head.append(el("span", { class: "settings" }, `approvals ${s.label}: ${s.value}`));
    const all = el("button", { type: "button", class: "approve-all" }, `Approve all (${view.all.length})`);
    all.addEventListener("click", () => openConfirm(view));
    head.append(all);
    const table = el("table", {},
      el("thead", {}, el("tr", {}, ...["Kind", "Name", "Operation", "Wave", "Waiting since", "Message", ""].map((h) => el("th", {}, h)))));
    const tbody = el("tbody");
    for (const row of view.rows) {
      const key = rowKey(row);
      const r = row.resource;
      const button = el("button", { type: "button", class: "approve" }, "Approve");
      button.addEventListener("click", () => approve(view.stack, [row], button));
      const message = el("td", { class: "message" }, row.message || "");
      for (const f of row.extra || []) message.append(el("div", { class: "extra" }, `${f.label}: ${f.value}`));
      tbody.append(el("tr", {
        class: "approval", "data-namespace": r.namespace || row.stack.namespace,
        "data-kind": r.kind, "data-name": r.name, "data-stack": row.stack.name,
      },
        el("td", {}, qualifiedKind(r)),
        el("td", {}, r.name),
        el("td", { class: `op ${row.operation}` }, row.operation),
        el("td", {}, row.wave === undefined ? "—" : row.wave),
        el("td", { class: "since", title: row.since || "" }, since(row.since)),
        message,
        el("td", {}, button, resultNode(key))));
    }
    table.append(tbody);
    body.append(el("section", { class: "stack", "data-namespace": view.stack.namespace, "data-name": view.stack.name },
      head, table, resultNode(`all:${view.stack.namespace}/${view.stack.name}`)));
  }
}

function renderLocks() {
  const body = $("locks-body");
  if (!panelState(snapshot.locks, body)) return;
  if (snapshot.locks.items.length === 0) {
    body.append(el("p", { class: "muted" }, "No Locks."));
    return;
  }
  const tbody = el("tbody");
  for (const l of snapshot.locks.items) {
    const state = l.active ? "locked" : `not yet: ${l.ready ? `${l.ready.reason} ${l.ready.message}` : "not reconciled"}`;
    tbody.append(el("tr", { class: "lock", "data-name": l.name },
      el("td", {}, l.namespace),
      el("td", {}, `${l.target.kind}/${l.target.name}`),
      el("td", {}, l.name),
      el("td", {}, state),
      el("td", {}, l.reason || "")));
  }
  body.append(el("table", {},
    el("thead", {}, el("tr", {}, ...["Namespace", "Object", "Lock", "State", "Why"].map((h) => el("th", {}, h)))),
    tbody));
}

function renderServices() {
  const body = $("services-body");
  if (!panelState(snapshot.services, body)) return;
  if (snapshot.services.items.length === 0) {
    body.append(el("p", { class: "muted" }, "No ManagedService is being deleted."));
    return;
  }
  const tbody = el("tbody");
  for (const s of snapshot.services.items) {
    const message = el("td", {}, s.message || "");
    if (s.hint) message.append(el("div", { class: "hint" }, "To confirm: ", el("code", {}, s.hint)));
    tbody.append(el("tr", { class: "service", "data-name": s.name },
      el("td", {}, s.namespace),
      el("td", {}, s.name),
      el("td", {}, s.deletionPolicy || ""),
      el("td", { class: "reason" }, s.reason || ""),
      message));
  }
  body.append(el("table", {},
    el("thead", {}, el("tr", {}, ...["Namespace", "Service", "Policy", "Reason", "Message"].map((h) => el("th", {}, h)))),
    tbody));
}

function previewKey(d) {
  return `${d.namespace}/${d.kind}/${d.name}`;
}

function previewNode(p) {
  if (p.error) return el("div", { class: "error preview-error" }, p.error);
  const wave = (w) => (w === undefined ? "" : ` (wave ${w})`);
  const list = el("ul", { class: "preview-steps" });
  for (const r of p.removed) list.append(el("li", { class: "removed" }, `removed: ${r.kind}/${r.name}${wave(r.wave)}: ${r.how}`));
  for (const s of p.stops) list.append(el("li", { class: "stops" }, `stops: ${s.kind}/${s.name}${wave(s.wave)}: ${s.summary}: ${s.message}`));
  for (const k of p.kept) list.append(el("li", { class: "stays" }, `stays: ${k.kind}/${k.name}${wave(k.wave)}: ${k.why}`));
  for (const b of p.backups || []) list.append(el("li", { class: "backup" }, `ServiceBackup ${b.name} (${b.origin}): ${b.fate}`));
  for (const n of p.notes || []) list.append(el("li", { class: "note" }, `note: ${n}`));
  return el("div", {},
    el("p", { class: `outcome ${p.outcome.verdict}` }, p.outcome.line),
    list,
    el("p", { class: "muted" }, `read at ${p.at}`));
}

function renderPreview() {
  const body = $("preview-body");
  if (!panelState(snapshot.stacks, body)) return;
  const items = snapshot.deletable || [];
  if (items.length === 0) {
    body.append(el("p", { class: "muted" }, "No Stack or ManagedService."));
    return;
  }
  const tbody = el("tbody");
  for (const d of items) {
    const button = el("button", { type: "button", class: "preview" }, "Preview delete");
    button.addEventListener("click", () => preview(d, button));
    const result = el("td", { class: "preview-result" });
    const p = previews.get(previewKey(d));
    if (p) result.append(previewNode(p));
    tbody.append(el("tr", { class: "deletable", "data-namespace": d.namespace, "data-kind": d.kind, "data-name": d.name },
      el("td", {}, d.namespace),
      el("td", {}, `${d.kind}/${d.name}`),
      el("td", {}, button),
      result));
  }
  body.append(el("table", {},
    el("thead", {}, el("tr", {}, ...["Namespace", "Object", "", "What the delete would do"].map((h) => el("th", {}, h)))),
    tbody));
}

// Read-only: a GET the server answers with the same preview as
// `kubectl navique preview delete`.
async function preview(d, button) {
  button.disabled = true;
  let result;
  try {
    const query = new URLSearchParams({ kind: d.kind, namespace: d.namespace, name: d.name });
    const response = await fetch(`api/preview?${query}`);
    const text = await response.text();
    result = JSON.parse(text);
  } catch (e) {
    result = { error: String(e.message || e) };
  }
  result.at = new Date().toLocaleTimeString();
  previews.set(previewKey(d), result);
  button.disabled = false;
  render();
}

function render() {
  $("scope").textContent = snapshot.scope;
  renderApprovals();
  renderLocks();
  renderPreview();
  renderServices();
}

function openConfirm(view) {
  // A copy: later snapshots do not change what the user is confirming.
  confirming = { stack: view.stack, rows: view.all.map((r) => JSON.parse(JSON.stringify(r))) };
  $("confirm-title").textContent = `Approve all of Stack ${view.stack.namespace}/${view.stack.name}?`;
  $("confirm-list").replaceChildren(...confirming.rows.map((row) =>
    el("li", {}, `${row.operation} ${qualifiedKind(row.resource)}/${row.resource.name}`,
      row.stack.name === view.stack.name ? "" : ` (Stack ${row.stack.name})`)));
  $("confirm-ok").textContent = `Approve ${confirming.rows.length}`;
  $("confirm").showModal();
}

$("confirm-cancel").addEventListener("click", () => { confirming = null; $("confirm").close(); });
$("confirm-ok").addEventListener("click", () => {
  const { stack, rows } = confirming;
  confirming = null;
  $("confirm").close();
  approve(stack, rows, null);
});

async function approve(stack, rows, button) {
  if (button) button.disabled = true;
  const allKey = `all:${stack.namespace}/${stack.name}`;
  let report;
  try {
    const response = await fetch("api/approve", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ stack, items: rows.map(item) }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(text);
    report = JSON.parse(text);
  } catch (e) {
    const error = { approved: false, error: String(e.message || e) };
    for (const row of rows) results.set(rowKey(row), error);
    if (!button) results.set(allKey, error);
    if (button) button.disabled = false;
    render();
    return;
  }
  report.results.forEach((r, i) => { if (rows[i]) results.set(rowKey(rows[i]), r); });
  if (!button) {
    const failed = report.results.filter((r) => !r.approved).length;
    results.set(allKey, failed
      ? { approved: false, error: `${failed} of ${report.results.length} not approved` }
      : { approved: true });
  }
  if (button) button.disabled = false;
  render();
}

function connect() {
  const events = new EventSource("events");
  events.onopen = () => { $("live").textContent = "live"; $("live").classList.remove("down"); };
  events.onmessage = (e) => { snapshot = JSON.parse(e.data); render(); };
  events.onerror = () => { $("live").textContent = "reconnecting…"; $("live").classList.add("down"); };
}

connect();
