// warden's dashboard: reads the JSON API with the session cookie, answers approvals with the
// session's CSRF token. Every value is put on the page as text (never as HTML).
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const streams = new Map(); // run id -> EventSource, for runs still going

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
  });
  if (response.status === 401) {
    location.reload(); // signed out (or warden restarted): back to the sign-in form
    throw new Error("signed out");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function fill(table, items, columns) {
  const body = document.querySelector(`#${table} tbody`);
  const rows = items.map((item) => {
    const tr = document.createElement("tr");
    for (const [value, className] of columns(item)) cell(tr, value, className);
    return tr;
  });
  body.replaceChildren(...rows);
}

function block(label, text) {
  const div = document.createElement("div");
  const b = document.createElement("b");
  b.textContent = label;
  const pre = document.createElement("pre");
  pre.textContent = text;
  div.append(b, pre);
  return div;
}

async function answer(id, decision, card) {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  try {
    await api(`/v1/approvals/${encodeURIComponent(id)}`, {
      method: "POST",
      body: JSON.stringify({ decision }),
    });
    card.dataset.answered = decision;
  } catch (e) {
    const note = document.createElement("p");
    note.textContent = `Not answered: ${e.message}`;
    card.appendChild(note);
  }
  refresh();
}

function showApprovals(approvals) {
  const box = document.getElementById("approvals");
  document.getElementById("approvals-empty").hidden = approvals.length > 0;
  const cards = approvals.map((a) => {
    const card = document.createElement("div");
    card.className = "approval";
    card.dataset.id = a.id;
    const title = document.createElement("p");
    title.textContent = `Run ${a.run_id} asks to use ${a.tool}: ${a.reason}`;
    card.append(title, block("What would run", a.command));
    if (a.detail) card.append(block("The change", a.detail));
    const actions = document.createElement("div");
    actions.className = "actions";
    for (const [decision, label] of [["approve", "Approve"], ["deny", "Deny"]]) {
      const button = document.createElement("button");
      button.className = decision;
      button.textContent = label;
      button.addEventListener("click", () => answer(a.id, decision, card));
      actions.appendChild(button);
    }
    card.appendChild(actions);
    return card;
  });
  box.replaceChildren(...cards);
}

function follow(run) {
  const going = ["queued", "running", "waiting_approval"].includes(run.status);
  if (!going || streams.has(run.id)) return;
  const source = new EventSource(`/v1/runs/${encodeURIComponent(run.id)}/events`);
  source.onmessage = refresh;
  for (const name of ["status", "approval", "tool_start", "tool_end", "text", "progress"]) {
    source.addEventListener(name, refresh);
  }
  source.addEventListener("end", () => { source.close(); streams.delete(run.id); refresh(); });
  source.onerror = () => { source.close(); streams.delete(run.id); };
  streams.set(run.id, source);
}

let pending = null;
async function refresh() {
  if (pending) return pending;
  pending = (async () => {
    try {
      const [runs, approvals, jobs, audit] = await Promise.all([
        api("/v1/runs?limit=50"),
        api("/v1/approvals"),
        api("/v1/jobs"),
        api("/v1/audit?since=24h&limit=50"),
      ]);
      showApprovals(approvals.approvals);
      fill("runs", runs.runs, (r) => [
        [r.id], [r.thread], [r.status, `status-${r.status}`], [r.output || r.error || ""],
      ]);
      for (const run of runs.runs) follow(run);
      fill("jobs", jobs.jobs, (j) => [
        [`#${j.id} ${j.name}`], [`${j.kind} ${j.spec}`], [j.session],
        [j.running ? "running" : (j.enabled ? j.next_run_at : "finished")],
      ]);
      fill("audit", audit.entries.slice().reverse(), (e) => [
        [e.at], [e.tool], [e.decision], [e.input],
      ]);
      document.getElementById("live").textContent = `live · ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      document.getElementById("live").textContent = `not updated: ${e.message}`;
    } finally {
      pending = null;
    }
  })();
  return pending;
}

// Skills and MCP grants change rarely (and listing skills hashes their files): read them
// when the page opens and once a minute.
async function refreshGrants() {
  try {
    const [skills, mcp] = await Promise.all([api("/v1/skills"), api("/v1/mcp")]);
    fill("skills", skills.skills, (k) => [
      [k.name], [k.source],
      [k.invalid ? `invalid: ${k.invalid}` : (k.grant && k.grant.status), k.granted ? "granted" : ""],
      [(k.allows || []).join("\n"), "lines"],
    ]);
    fill("mcp", mcp.servers, (m) => [
      [m.name], [m.server], [m.status, m.granted ? "granted" : ""],
      [(m.tools || []).map((t) => `${t.name}: ${t.decision}`).join("\n"), "lines"],
    ]);
  } catch (e) {
    document.getElementById("live").textContent = `skills and MCP not read: ${e.message}`;
  }
}

refresh();
refreshGrants();
setInterval(refresh, 3000);
setInterval(refreshGrants, 60000);
