"""The admin page for traces: recent runs of a tenant, one run as a timeline, and the whole run on demand.

The list and the timeline read the shape endpoints, which never carry prompts, outputs, arguments or
results. The whole run (prompts, outputs, arguments, results, redacted) is fetched only when the viewer
asks for it, from the operator-only trace route, which records each read in the ledger.
Plain HTML and DOM calls (textContent only), no build step. The page
itself holds no data and is served to anyone; the operator token is typed into its form and sent as an
Authorization header to the routes it reads, never taken from the page's address.
"""

TRACES_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memlog traces</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 1.5rem; color: #222; }
  form { display: flex; gap: .75rem; align-items: end; flex-wrap: wrap; margin-bottom: 1rem; }
  label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
  table { border-collapse: collapse; width: 100%; margin-bottom: 1.5rem; }
  th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #eee; }
  tr.run { cursor: pointer; } tr.run:hover { background: #f4f7ff; }
  .error { color: #b00020; } .ok { color: #1b7a33; }
  #timeline .bar { position: relative; height: 22px; margin: 3px 0; background: #f3f3f3; }
  #timeline .fill { position: absolute; top: 0; bottom: 0; border-radius: 3px; }
  #timeline .model { background: #8fb3ff; } #timeline .tool { background: #ffd08a; }
  #timeline .failed { background: #ff9a9a; }
  #timeline .label { position: absolute; left: .4rem; top: 2px; font-size: 12px; white-space: nowrap; }
  #whole pre { background: #f7f7f7; padding: .5rem; white-space: pre-wrap; max-height: 16rem; overflow: auto; }
</style>
</head>
<body>
<h1>Traces</h1>
<form id="filters" method="post">  <!-- never GET: the token must not reach an address -->
  <label>operator token <input name="token" type="password" autocomplete="off"></label>
  <label>tenant <input name="tenant" required></label>
  <label>agent <input name="agent"></label>
  <label>status <select name="status">
    <option value="">any</option><option>ok</option><option>error</option>
  </select></label>
  <label>last hours <input name="hours" type="number" min="1" value="168"></label>
  <button type="submit">Show</button>
</form>
<table id="runs"><thead><tr>
  <th>started</th><th>run</th><th>agent</th><th>status</th><th>steps</th><th>tools</th><th>models</th>
  <th>tokens in / out</th><th>duration</th>
</tr></thead><tbody></tbody></table>
<h2 id="run-title"></h2>
<div id="timeline"></div>
<button id="show-whole" hidden>Whole trace (operator token; the read is in the ledger)</button>
<div id="whole"></div>
<script>
const form = document.getElementById("filters");
const params = new URLSearchParams(location.search);
// the address may preset the filters, never the token: an address ends up in histories, logs and Referer headers
for (const [key, value] of params) { if (key !== "token" && form.elements[key]) form.elements[key].value = value; }

function headers() {
  const token = form.elements.token.value;
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function cell(row, text, cls) {
  const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; return td;
}

async function showRuns(event) {
  if (event) event.preventDefault();
  const tenant = form.elements.tenant.value.trim();
  if (!tenant) return;
  const query = new URLSearchParams();
  if (form.elements.agent.value) query.set("agent", form.elements.agent.value);
  if (form.elements.status.value) query.set("status", form.elements.status.value);
  query.set("since", String(Date.now() - Number(form.elements.hours.value || 168) * 3600000));
  const response = await fetch(`/v1/tenants/${encodeURIComponent(tenant)}/runs?${query}`, { headers: headers() });
  const body = await response.json();
  const tbody = document.querySelector("#runs tbody");
  tbody.replaceChildren();
  for (const run of body.runs || []) {
    const row = tbody.insertRow(); row.className = "run"; row.dataset.run = run.run_id;
    cell(row, new Date(run.started_at).toISOString());
    cell(row, run.run_id); cell(row, run.agent || ""); cell(row, run.status, run.status);
    cell(row, String(run.steps)); cell(row, run.tools.join(", ")); cell(row, run.models.join(", "));
    cell(row, `${run.input_tokens} / ${run.output_tokens}`); cell(row, `${run.duration_ms} ms`);
    row.addEventListener("click", () => showRun(tenant, run.run_id));
  }
  document.body.dataset.runs = String((body.runs || []).length);
}

async function showRun(tenant, runId) {
  const url = `/v1/tenants/${encodeURIComponent(tenant)}/runs/${encodeURIComponent(runId)}`;
  const response = await fetch(url, { headers: headers() });
  const run = await response.json();
  document.getElementById("run-title").textContent =
    `${run.run_id}: ${run.status}, ${run.steps} model steps, ${run.tool_calls} tool calls, ${run.duration_ms} ms`;
  const box = document.getElementById("timeline");
  box.replaceChildren();
  const span = Math.max(run.duration_ms, 1);
  for (const item of run.timeline) {
    const bar = document.createElement("div"); bar.className = "bar";
    const fill = document.createElement("div");
    fill.className = `fill ${item.kind}${item.ok ? "" : " failed"}`;
    fill.style.left = `${Math.max(0, (item.started_at - run.started_at) / span * 100)}%`;
    fill.style.width = `${Math.max(0.5, item.duration_ms / span * 100)}%`;
    const label = document.createElement("span"); label.className = "label";
    const tokens = item.kind === "model" ? `, ${item.input_tokens} in / ${item.output_tokens} out` : "";
    const failed = item.ok ? "" : " (failed)";
    label.textContent = `${item.seq}. ${item.kind} ${item.name}${failed}: ${item.duration_ms} ms${tokens}`;
    bar.append(fill, label); box.append(bar);
  }
  document.body.dataset.timeline = String(run.timeline.length);
  const button = document.getElementById("show-whole");
  button.hidden = false;
  button.onclick = () => showWhole(tenant, runId);
  document.getElementById("whole").replaceChildren();
}

function block(box, title, text) {
  const heading = document.createElement("h3"); heading.textContent = title;
  const pre = document.createElement("pre"); pre.textContent = text;
  box.append(heading, pre);
}

async function showWhole(tenant, runId) {
  const url = `/v1/tenants/${encodeURIComponent(tenant)}/runs/${encodeURIComponent(runId)}/trace`;
  const response = await fetch(url, { headers: headers() });
  const box = document.getElementById("whole");
  box.replaceChildren();
  if (!response.ok) {
    block(box, `refused (${response.status})`, await response.text());
    document.body.dataset.whole = "refused";
    return;
  }
  const run = await response.json();
  const items = [
    ...run.steps.map((step) => ({ seq: step.seq, step })),
    ...run.tool_calls.map((call) => ({ seq: call.seq, call })),
  ].sort((a, b) => a.seq - b.seq);
  for (const item of items) {
    if (item.step) {
      block(box, `${item.seq}. model ${item.step.model}: prompt`, item.step.prompt);
      block(box, `${item.seq}. model ${item.step.model}: output`, item.step.output);
    } else {
      const status = item.call.ok ? "ok" : "failed";
      block(box, `${item.seq}. tool ${item.call.name} (${status}): arguments`, JSON.stringify(item.call.arguments));
      block(box, `${item.seq}. tool ${item.call.name}: result`, JSON.stringify(item.call.result));
    }
  }
  document.body.dataset.whole = String(items.length);
}

form.addEventListener("submit", showRuns);
if (params.get("tenant")) showRuns();
</script>
</body>
</html>
"""
