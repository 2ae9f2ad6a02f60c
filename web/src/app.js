// The vmaas web page: sign in with a bearer token, see your VMs live (the
// event stream), create one from a template's typed parameters (the
// server's validation messages beside the fields), start, stop, restart,
// delete, type into a VM's serial console (xterm.js over the console
// WebSocket), and see and type into its screen (noVNC's modules over the
// VNC WebSocket). Plain browser JavaScript, no build step.
"use strict";

const API = "/api/fulfillment/v1";
const $ = (id) => document.getElementById(id);
const state = { token: sessionStorage.getItem("vmaas-token") || "", vms: new Map(), gone: new Set(), templates: [], stream: null, term: null, screen: null };

// ---- the API ----

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const rsp = await fetch(API + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await rsp.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = { message: text }; }
  return { status: rsp.status, body: json };
}

/** The claims of a JWT, for display only (the server checks it). */
function claims(token) {
  try {
    const b64 = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(b64));
  } catch (_) { return {}; }
}

// ---- signing in ----

async function signIn(token) {
  state.token = token.trim();
  const r = await api("GET", "/virtual_machines?limit=1");
  if (r.status !== 200) {
    state.token = "";
    $("sign-in-error").textContent = (r.body && r.body.message) || `the server answered ${r.status}`;
    return;
  }
  sessionStorage.setItem("vmaas-token", state.token);
  const c = claims(state.token);
  $("who").textContent = `${c.sub || "?"} in tenant ${c.tenant || "?"}`;
  $("sign-in").hidden = true;
  $("console-app").hidden = false;
  $("sign-out").hidden = false;
  await Promise.all([loadTemplates(), loadVms()]);
  watch();
}

function signOut() {
  sessionStorage.removeItem("vmaas-token");
  location.reload();
}

// ---- templates and the create form ----

async function loadTemplates() {
  const r = await api("GET", "/virtual_machine_templates?limit=1000");
  state.templates = (r.body && r.body.items) || [];
  const select = $("template");
  select.replaceChildren(...state.templates.map((t) => new Option(t.title ? `${t.title} (${t.id})` : t.id, t.id)));
  $("templates").tBodies[0].replaceChildren(...state.templates.map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.template = t.id;
    for (const text of [t.id, t.title || "", (t.parameters || []).map((p) => p.name).join(", ")]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  }));
  renderParameters();
}

function hint(p) {
  const range = p.min !== undefined || p.max !== undefined ? `${p.min ?? ""} to ${p.max ?? ""}` : "";
  const def = p.default && p.default.value !== undefined ? `default ${JSON.stringify(p.default.value)}` : "";
  return [p.type || "string", range, def].filter(Boolean).join(", ");
}

function parameterInput(p) {
  const value = p.default ? p.default.value : undefined;
  if (p.enum) {
    const s = document.createElement("select");
    s.append(...p.enum.map((v) => new Option(String(v), JSON.stringify(v), false, JSON.stringify(v) === JSON.stringify(value))));
    return s;
  }
  if (p.type === "bool") {
    const c = document.createElement("input");
    c.type = "checkbox";
    c.checked = value === true;
    return c;
  }
  if (p.type === "list") {
    const t = document.createElement("textarea");
    t.rows = 2;
    t.placeholder = "one per line";
    t.value = Array.isArray(value) ? value.join("\n") : "";
    return t;
  }
  const i = document.createElement("input");
  if (p.type === "integer") {
    i.type = "number";
    if (p.min !== undefined) i.min = p.min;
    if (p.max !== undefined) i.max = p.max;
  }
  i.value = value === undefined ? "" : String(value);
  return i;
}

function renderParameters() {
  const t = state.templates.find((t) => t.id === $("template").value);
  $("template-description").textContent = t ? (t.description || "").split("\n")[0] : "";
  const box = $("parameters");
  box.replaceChildren();
  for (const p of (t && t.parameters) || []) {
    const label = document.createElement("label");
    const input = parameterInput(p);
    input.dataset.parameter = p.name;
    input.dataset.type = p.type || "string";
    input.id = `param-${p.name}`;
    const h = document.createElement("span");
    h.className = "hint";
    h.textContent = hint(p);
    label.append(p.title || p.name, h, input);
    const err = document.createElement("p");
    err.className = "error field-error";
    err.dataset.field = `object.spec.template_parameters.${p.name}`;
    box.append(label, err);
  }
}

function parameterValue(input) {
  switch (input.dataset.type) {
    case "bool": return input.checked;
    case "integer": return input.value === "" ? undefined : Number(input.value);
    case "list": return input.value.split("\n").map((l) => l.trim()).filter(Boolean);
    default:
      if (input.tagName === "SELECT") return JSON.parse(input.value);
      return input.value === "" ? undefined : input.value;
  }
}

function showErrors(body) {
  const shown = new Set();
  for (const el of document.querySelectorAll(".field-error")) el.textContent = "";
  for (const d of (body && body.details) || []) {
    const el = [...document.querySelectorAll(".field-error")].find((e) => d.field === e.dataset.field || d.field.startsWith(`${e.dataset.field}.`));
    if (el) {
      el.textContent = d.reason || d.description;
      shown.add(d);
    }
  }
  const rest = ((body && body.details) || []).filter((d) => !shown.has(d)).map((d) => `${d.field}: ${d.reason || d.description}`);
  $("create-error").textContent = rest.length ? rest.join("; ") : shown.size ? "" : (body && body.message) || "";
}

async function createVm(event) {
  event.preventDefault();
  const params = {};
  for (const input of document.querySelectorAll("[data-parameter]")) {
    const v = parameterValue(input);
    if (v !== undefined) params[input.dataset.parameter] = { value: v };
  }
  const body = { object: { metadata: { name: $("vm-name").value.trim() }, spec: { template: $("template").value, template_parameters: params } } };
  $("create-button").disabled = true;
  try {
    const r = await api("POST", "/virtual_machines", body);
    if (r.status === 201) {
      showErrors(null);
      $("vm-name").value = "";
      upsert(r.body.object);
    } else {
      showErrors(r.body);
    }
  } finally {
    $("create-button").disabled = false;
  }
}

// ---- the VM list, live ----

async function loadVms() {
  const r = await api("GET", "/virtual_machines?limit=1000");
  state.vms = new Map(((r.body && r.body.items) || []).map((v) => [v.id, v]));
  render();
}

/** Adds or updates a VM, newest version wins; a VM whose deletion was seen stays gone
 * (the DELETE response, which still says DELETING, can arrive after the event). */
function upsert(vm) {
  if (state.gone.has(vm.id)) return;
  const old = state.vms.get(vm.id);
  if (!old || (vm.metadata.version || 0) >= (old.metadata.version || 0)) state.vms.set(vm.id, vm);
  render();
}

function shortState(vm) {
  return ((vm.status && vm.status.state) || "").replace("VIRTUAL_MACHINE_STATE_", "") || "UNKNOWN";
}

function button(text, action, vm) {
  const b = document.createElement("button");
  b.textContent = text;
  b.dataset.action = action;
  b.addEventListener("click", () => act(action, vm, b));
  return b;
}

function render() {
  const rows = [...state.vms.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)).map((vm) => {
    const tr = document.createElement("tr");
    tr.dataset.name = vm.metadata.name;
    const st = shortState(vm);
    const cells = [vm.metadata.name, vm.spec.template, st, (vm.status && (vm.status.externalIP || vm.status.internalIP)) || ""];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (i === 2) td.className = `state state-${st}`;
      tr.append(td);
    });
    const actions = document.createElement("td");
    actions.className = "actions";
    const running = vm.spec.state !== "stopped";
    actions.append(button(running ? "Stop" : "Start", running ? "stop" : "start", vm), button("Restart", "restart", vm),
      button("Console", "console", vm), button("Screen", "screen", vm), button("Delete", "delete", vm));
    tr.append(actions);
    return tr;
  });
  $("vms").tBodies[0].replaceChildren(...rows);
  $("no-vms").hidden = rows.length > 0;
}

async function act(action, vm, b) {
  const path = `/virtual_machines/${vm.id}`;
  let r;
  if (action === "start" || action === "stop") {
    r = await api("PATCH", path, { object: { spec: { state: action === "start" ? "started" : "stopped" } } });
  } else if (action === "restart") {
    r = await api("POST", `${path}/restart`);
  } else if (action === "delete") {
    if (b.dataset.armed !== "yes") {
      b.dataset.armed = "yes";
      b.textContent = "Really delete?";
      return;
    }
    r = await api("DELETE", path);
  } else if (action === "console") {
    return openConsole(vm);
  } else if (action === "screen") {
    return openScreen(vm);
  }
  if (r && r.status < 300 && r.body && r.body.object) upsert(r.body.object);
  else if (r && r.status >= 300) alertLine(`${action} ${vm.metadata.name}: ${(r.body && r.body.message) || r.status}`);
}

function alertLine(text) {
  $("create-error").textContent = text;
}

/** Reads the event stream (Server-Sent Events over fetch, so the token goes in a header). */
async function watch() {
  let after = null;
  for (let delay = 500; ; delay = Math.min(delay * 2, 10000)) {
    try {
      const q = after === null ? "watch=true" : `watch=true&after=${after}`;
      const rsp = await fetch(`/api/events/v1/events?${q}`, { headers: { Authorization: `Bearer ${state.token}` } });
      if (rsp.status === 410) { after = null; await loadVms(); continue; }
      if (!rsp.ok) throw new Error(`events: ${rsp.status}`);
      $("live").textContent = "live";
      $("live").className = "badge live";
      delay = 500;
      const reader = rsp.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          after = onEvent(block) ?? after;
        }
      }
    } catch (e) {
      console.warn("event stream:", e);
    }
    $("live").textContent = "reconnecting…";
    $("live").className = "badge";
    await new Promise((r) => setTimeout(r, delay));
    if (after === null) await loadVms();
  }
}

/** One SSE block; its event id. */
function onEvent(block) {
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("id:")) id = Number(line.slice(3).trim());
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (!data.length) return id;
  const event = JSON.parse(data.join("\n"));
  const vm = event.virtual_machine;
  if (vm) {
    if (event.type === "EVENT_TYPE_OBJECT_DELETED") { state.gone.add(vm.id); state.vms.delete(vm.id); render(); } else upsert(vm);
  }
  return id;
}

// ---- the serial console ----

async function openConsole(vm) {
  closeConsole();
  const r = await api("POST", `/virtual_machines/${vm.id}/console_sessions`);
  if (r.status >= 300) return alertLine(`console of ${vm.metadata.name}: ${(r.body && r.body.message) || r.status}`);
  $("terminal-section").hidden = false;
  $("terminal-vm").textContent = vm.metadata.name;
  const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open($("terminal"));
  fit.fit();
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${r.body.url}`);
  ws.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  ws.onopen = () => { $("terminal").dataset.connected = "yes"; };
  ws.onmessage = (m) => term.write(typeof m.data === "string" ? m.data : new Uint8Array(m.data));
  ws.onclose = () => term.write("\r\n[the console closed]\r\n");
  term.onData((d) => { if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d)); });
  state.term = { term, ws };
  term.focus();
}

function closeConsole() {
  if (state.term) {
    state.term.ws.close();
    state.term.term.dispose();
    state.term = null;
  }
  delete $("terminal").dataset.connected;
  $("terminal-section").hidden = true;
}

// ---- the graphical console (noVNC over the VM's VNC WebSocket) ----

async function openScreen(vm) {
  closeScreen();
  const r = await api("POST", `/virtual_machines/${vm.id}/console_sessions`, { type: "CONSOLE_TYPE_VNC" });
  if (r.status >= 300) return alertLine(`screen of ${vm.metadata.name}: ${(r.body && r.body.message) || r.status}`);
  const { default: RFB } = await import("/assets/novnc/core/rfb.js");
  $("screen-section").hidden = false;
  $("screen-vm").textContent = vm.metadata.name;
  $("screen-state").textContent = "connecting…";
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${r.body.url}`;
  const rfb = new RFB($("screen"), url, { wsProtocols: ["binary"] });
  rfb.scaleViewport = false;
  rfb.focusOnClick = true;
  rfb.addEventListener("connect", () => {
    $("screen").dataset.connected = "yes";
    $("screen-state").textContent = "connected";
    rfb.focus();
  });
  rfb.addEventListener("disconnect", (e) => {
    delete $("screen").dataset.connected;
    $("screen-state").textContent = e.detail.clean ? "closed" : "lost";
  });
  state.screen = rfb;
}

function closeScreen() {
  if (state.screen) {
    state.screen.disconnect();
    state.screen = null;
  }
  delete $("screen").dataset.connected;
  $("screen-section").hidden = true;
}

// ---- wiring ----

$("sign-in-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("token").value); });
$("sign-out").addEventListener("click", signOut);
$("template").addEventListener("change", renderParameters);
$("create-form").addEventListener("submit", createVm);
$("terminal-close").addEventListener("click", closeConsole);
$("screen-close").addEventListener("click", closeScreen);
if (state.token) signIn(state.token);
