// Tapedeck's page: the live view over /api/live, the transport, and the take page's actions.
// Plain JavaScript, no libraries. Every request that changes something sends
// X-Tapedeck-Request (the server also checks the Origin).
"use strict";

function $(id) { return document.getElementById(id); }

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: Object.assign({ "X-Tapedeck-Request": "1" }, body === undefined ? {} : { "Content-Type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  let data = null;
  const text = await response.text();
  if (text) { try { data = JSON.parse(text); } catch (e) { data = null; } }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : `${response.status} ${response.statusText}`;
    throw new Error(message);
  }
  return data;
}

function say(text) { const m = $("message"); if (m) m.textContent = text || ""; }

function clock(seconds) {
  const s = Math.floor(seconds), t = Math.floor((seconds - s) * 10);
  if (s >= 3600) return `${Math.floor(s / 3600)}:${String(Math.floor(s / 60) % 60).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}.${t}`;
}

function left(seconds) {
  if (seconds == null) return "–";
  if (seconds >= 86400) return `${Math.floor(seconds / 86400)} d ${Math.floor(seconds / 3600) % 24} h`;
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)} h ${Math.floor(seconds / 60) % 60} min`;
  return `${Math.floor(seconds / 60)} min`;
}

// dBFS (-90…0) to a bar position: the meter's scale is linear in dB over its lower 60 dB.
function position(db) { return Math.max(0, Math.min(1, (db + 60) / 60)) * 100; }

const live = {
  generation: null,
  meters: [],
  render(state) {
    document.body.dataset.phase = state.phase;
    const phase = $("phase");
    phase.textContent = state.waiting ? `waiting for ${state.waiting}` : state.phase;
    phase.className = "phase " + state.phase;
    $("target").textContent = state.target || "";
    // Who records: another process's recording (a `tapedeck record`) is shown and controlled too.
    const r = state.recorder;
    const more = state.otherRecorders > 0 ? ` (${state.otherRecorders} more recording; \`tapedeck status\` lists them)` : "";
    $("recorder").textContent = r ? (r.own ? "" : `started by tapedeck ${r.startedBy} (PID ${r.pid})`) + (r.stopsAt ? ` · stops ${new Date(r.stopsAt).toLocaleTimeString()}` : "") + more : "";
    $("elapsed").textContent = clock(state.seconds);
    $("left").textContent = left(state.secondsLeft);
    $("overruns").textContent = state.overruns;
    $("clipped").textContent = state.clippedSamples;
    $("markers").textContent = state.markers;
    const run = [];
    if (state.takeIndex > 1) run.push(`take ${state.takeIndex}`);
    if (state.secondsToSplit != null) run.push(`next split in ${clock(state.secondsToSplit)}`);
    if (state.preRollSeconds > 0) run.push(`${state.preRollSeconds.toFixed(1)} s pre-roll`);
    if (state.voxHolding) run.push("VOX holding");
    $("run-facts").hidden = run.length === 0;
    $("run").textContent = run.join(", ");
    this.renderMeters(state.channels);
    const recording = state.recording;
    $("record").disabled = recording;
    $("stop").disabled = !recording;
    $("mark").disabled = state.phase !== "recording";
    $("split").disabled = state.phase !== "recording" || !!state.waiting || (r != null && !r.splits);
    if (state.last) {
      const l = state.last;
      const last = $("last");
      last.textContent = "";
      if (l.failed) { last.textContent = `Last recording: ${l.summary}`; }
      else if (l.takeID) {
        last.append("Last take: ");
        const a = document.createElement("a");
        a.href = `/takes/${encodeURIComponent(l.takeID)}`;
        a.textContent = `${l.session} / ${l.take}`;
        a.id = "last-take";
        last.append(a, ` (${clock(l.seconds)}). ${l.summary}`);
      } else { last.textContent = l.summary; }
    }
    if (this.generation !== null && state.libraryGeneration !== this.generation) refreshLibrary();
    this.generation = state.libraryGeneration;
  },
  renderMeters(channels) {
    const box = $("meters");
    if (this.meters.length !== channels.length) {
      box.textContent = "";
      this.meters = channels.map((_, i) => {
        const row = document.createElement("div");
        row.className = "meter";
        row.dataset.channel = String(i + 1);
        const label = document.createElement("span");
        label.className = "label";
        // As the terminal meter names them.
        label.textContent = channels.length === 2 ? ["L", "R"][i] : String(i + 1);
        const bar = document.createElement("div");
        bar.className = "bar";
        const fill = document.createElement("div");
        fill.className = "fill";
        const hold = document.createElement("div");
        hold.className = "hold";
        bar.append(fill, hold);
        const value = document.createElement("span");
        value.className = "value num";
        row.append(label, bar, value);
        box.append(row);
        return { row, fill, hold, value };
      });
    }
    channels.forEach((c, i) => {
      const m = this.meters[i];
      const p = position(c.level);
      m.fill.style.width = p + "%";
      // The colours belong to the scale, not to the filled part: the gradient spans the whole bar.
      m.fill.style.backgroundSize = p > 0 ? `${10000 / p}% 100%` : "100% 100%";
      m.hold.style.left = `calc(${position(c.hold)}% - 2px)`;
      m.value.textContent = c.level <= -90 ? "-inf" : c.level.toFixed(1);
      m.row.classList.toggle("clipped", c.clips > 0);
      m.row.dataset.level = String(c.level);
      m.row.dataset.clips = String(c.clips);
    });
  },
  connect() {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/live";
    const socket = new WebSocket(url);
    socket.onmessage = (event) => { try { this.render(JSON.parse(event.data)); } catch (e) { /* a bad message is skipped */ } };
    socket.onopen = () => say("");
    socket.onclose = () => {
      say("Lost the connection to the server; trying again…");
      setTimeout(() => this.connect(), 2000);
    };
  },
};

async function refreshLibrary() {
  const section = document.querySelector("[data-library]");
  if (!section) return;
  try {
    const response = await fetch(location.pathname + location.search, { credentials: "same-origin" });
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.querySelector("[data-library]");
    if (fresh) section.replaceWith(fresh);
  } catch (e) { /* kept as it is until the next change */ }
}

function setupTransport() {
  const form = $("transport");
  if (!form) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    say("");
    try {
      await api("POST", "/api/record", { session: form.session.value, take: form.take.value });
    } catch (e) { say(e.message); }
  });
  $("stop").addEventListener("click", async () => {
    try { await api("POST", "/api/stop"); } catch (e) { say(e.message); }
  });
  $("mark").addEventListener("click", async () => {
    try { await api("POST", "/api/markers", { label: "" }); } catch (e) { say(e.message); }
  });
  $("split").addEventListener("click", async () => {
    try { await api("POST", "/api/split"); } catch (e) { say(e.message); }
  });
  live.connect();
}

async function drawWaveform(canvas) {
  let peaks;
  try { peaks = await api("GET", canvas.dataset.peaks); } catch (e) { say(`No waveform: ${e.message}`); return; }
  const ratio = window.devicePixelRatio || 1;
  const width = Math.max(200, Math.round(canvas.clientWidth * ratio));
  const height = Math.round(canvas.clientHeight * ratio);
  canvas.width = width;
  canvas.height = height;
  const g = canvas.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, width, height);
  g.fillStyle = "#b0b0b0";
  g.fillRect(0, Math.floor(height / 2), width, 1);
  const n = peaks.min.length;
  canvas.dataset.points = String(n);
  if (n === 0) return;
  g.fillStyle = "#1f5fa8";
  const half = (height - 1) / 2;
  for (let x = 0; x < width; x++) {
    const a = Math.floor(x * n / width), b = Math.max(a, Math.floor((x + 1) * n / width) - 1);
    let lo = 32767, hi = -32768;
    for (let i = a; i <= Math.min(b, n - 1); i++) { lo = Math.min(lo, peaks.min[i]); hi = Math.max(hi, peaks.max[i]); }
    const top = Math.round(half - hi / 32768 * half), bottom = Math.round(half - lo / 32768 * half);
    g.fillRect(x, top, 1, Math.max(1, bottom - top + 1));
  }
  // The take's markers: a line on the waveform each, and a list whose entries seek to them.
  let take = null;
  try { take = await api("GET", canvas.dataset.take); } catch (e) { /* drawn without markers */ }
  const markers = (take && take.markers) || [];
  const frames = take ? take.frames : 0;
  if (frames > 0 && markers.length > 0) {
    g.fillStyle = "#c62828";
    for (const m of markers) g.fillRect(Math.min(width - 2, Math.round(m.frame / frames * width)), 0, 2, height);
    const list = document.createElement("ol");
    list.id = "marker-list";
    list.className = "markers";
    for (const m of markers) {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link";
      const seconds = m.frame / frames * (take.seconds || 0);
      button.textContent = `${clock(seconds)}${m.label ? " " + m.label : ""}`;
      button.addEventListener("click", () => { const p = $("player"); p.currentTime = seconds; p.play().catch(() => {}); });
      item.append(button);
      list.append(item);
    }
    canvas.after(list);
  }
  canvas.dataset.markers = String(markers.length);
  canvas.dataset.drawn = "true";
  const player = $("player");
  canvas.addEventListener("click", (event) => {
    const rect = canvas.getBoundingClientRect();
    if (player.duration) player.currentTime = (event.clientX - rect.left) / rect.width * player.duration;
  });
}

function setupTake() {
  const section = document.querySelector("[data-take-id]");
  if (!section) return;
  const id = section.dataset.takeId;
  const path = `/api/takes/${encodeURIComponent(id)}`;
  drawWaveform($("waveform"));
  $("rename").addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const take = await api("PATCH", path, { name: event.target.name.value });
      $("take-name").textContent = take.name;
      document.title = `${take.name} · Tapedeck`;
      say(`Renamed to “${take.name}”.`);
    } catch (e) { say(e.message); }
  });
  $("notes").addEventListener("submit", async (event) => {
    event.preventDefault();
    try { await api("PATCH", path, { notes: event.target.notes.value }); say("Notes saved."); } catch (e) { say(e.message); }
  });
  $("delete").addEventListener("click", async () => {
    if (!window.confirm(`Delete take "${$("take-name").textContent}", audio included? This cannot be undone.`)) return;
    try {
      await api("DELETE", path);
      location.href = `/sessions/${encodeURIComponent(section.dataset.sessionId)}`;
    } catch (e) { say(e.message); }
  });
  $("export").addEventListener("click", () => exportJob(`${path}/exports`, { format: $("export-format").value },
    { button: $("export"), progress: $("export-progress"), link: $("export-file") }));
}

// Starts an export (POST `path` with `body`), shows its progress, then offers its file in
// `parts.link` (and plays it in `parts.player`, when there is one); returns the finished job.
async function exportJob(path, body, parts) {
  const { button, progress, link, player } = parts;
  button.disabled = true;
  link.hidden = true;
  if (player) player.hidden = true;
  progress.hidden = false;
  progress.value = 0;
  say("");
  let job = null;
  try {
    job = await api("POST", path, body);
    while (job.state === "running") {
      await new Promise((r) => setTimeout(r, 300));
      job = await api("GET", `/api/exports/${job.id}`);
      progress.value = job.progress;
    }
    if (job.state === "failed") throw new Error(job.error || "The export failed.");
    progress.value = 1;
    link.href = job.file;
    link.hidden = false;
    if (player) {
      player.src = job.file;
      player.hidden = false;
    }
  } catch (e) { say(e.message); job = null; }
  button.disabled = false;
  return job;
}

// A session's timeline: a day's stretches on a bar, a range dragged across it (or typed), and
// that range exported as one verified file (POST /api/sessions/{id}/clips), then played and
// offered for download. Times are shown in the browser's time zone and sent in UTC.
function localText(date) {
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${date.getFullYear()}-${p(date.getMonth() + 1)}-${p(date.getDate())} ${p(date.getHours())}:${p(date.getMinutes())}:${p(date.getSeconds())}.${p(date.getMilliseconds(), 3)}`;
}

function parseLocal(text) {
  const m = /^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?\s*$/.exec(text);
  if (!m) return null;
  const ms = m[7] ? Number(m[7].padEnd(3, "0")) : 0;
  return new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6] || 0), ms);
}

const timeline = {
  section: null, data: null, view: null, drag: null,
  async load(date) {
    const url = this.section.dataset.timeline + (date ? `?date=${encodeURIComponent(date)}` : "");
    try { this.data = await api("GET", url); } catch (e) { say(`No timeline: ${e.message}`); return; }
    const select = $("timeline-day");
    select.textContent = "";
    for (const day of this.data.days || []) {
      const option = document.createElement("option");
      option.value = option.textContent = day;
      option.selected = day === this.data.date;
      select.append(option);
    }
    this.draw();
  },
  draw() {
    const d = this.data, bar = $("timeline-bar");
    const dayStart = Date.parse(d.dayStart), dayEnd = Date.parse(d.dayEnd);
    // The view: what was recorded that day, with a little room either side (the whole day when nothing was).
    let a = dayStart, b = dayEnd;
    if (d.stretches.length > 0) {
      a = Math.max(dayStart, Math.min(...d.stretches.map((s) => Date.parse(s.start))));
      b = Math.min(dayEnd, Math.max(...d.stretches.map((s) => Date.parse(s.end))));
      const pad = Math.max(1000, (b - a) * 0.02);
      a = Math.max(dayStart, a - pad);
      b = Math.min(dayEnd, b + pad);
    }
    this.view = { a, b };
    for (const old of bar.querySelectorAll(".stretch, .mark")) old.remove();
    const x = (t) => `${((t - a) / (b - a)) * 100}%`;
    for (const s of d.stretches) {
      const start = Math.max(a, Date.parse(s.start)), end = Math.min(b, Date.parse(s.end));
      const div = document.createElement("div");
      div.className = "stretch";
      div.style.left = x(start);
      div.style.width = `${((end - start) / (b - a)) * 100}%`;
      div.title = `${localText(new Date(Date.parse(s.start)))} to ${localText(new Date(Date.parse(s.end)))}: ${s.takes.map((t) => t.name).join(", ")}`;
      bar.append(div);
    }
    for (const m of d.markers) {
      const div = document.createElement("div");
      div.className = "mark";
      div.style.left = x(Date.parse(m.time));
      div.title = `${localText(new Date(Date.parse(m.time)))} ${m.label}`;
      bar.append(div);
    }
    const axis = $("timeline-axis");
    axis.textContent = "";
    for (let i = 0; i <= 4; i++) {
      const tick = document.createElement("span");
      tick.style.left = `${i * 25}%`;
      tick.textContent = localText(new Date(a + (b - a) * i / 4)).slice(11, 19);
      axis.append(tick);
    }
    const recorded = d.stretches.reduce((n, s) => n + s.seconds, 0);
    $("timeline-span").textContent = d.stretches.length === 0 ? "Nothing recorded that day."
      : `${d.stretches.length} stretch${d.stretches.length === 1 ? "" : "es"}, ${clock(recorded)} recorded, ${d.gaps.length} gap${d.gaps.length === 1 ? "" : "s"}. Drag across the bar to select.`;
    bar.dataset.viewStart = new Date(a).toISOString();
    bar.dataset.viewEnd = new Date(b).toISOString();
    bar.dataset.ready = "true";
  },
  at(event) {
    const rect = $("timeline-bar").getBoundingClientRect();
    const f = Math.max(0, Math.min(1, (event.clientX - rect.left) / rect.width));
    return Math.round(this.view.a + f * (this.view.b - this.view.a));
  },
  select(from, to) {
    const a = Math.min(from, to), b = Math.max(from, to);
    const sel = $("timeline-selection");
    sel.hidden = b <= a;
    sel.style.left = `${((a - this.view.a) / (this.view.b - this.view.a)) * 100}%`;
    sel.style.width = `${((b - a) / (this.view.b - this.view.a)) * 100}%`;
    $("clip-from").value = localText(new Date(a));
    $("clip-to").value = localText(new Date(b));
  },
  setup() {
    this.section = document.querySelector("[data-timeline]");
    if (!this.section) return;
    const bar = $("timeline-bar");
    bar.addEventListener("pointerdown", (event) => {
      if (!this.view) return;
      event.preventDefault();
      bar.setPointerCapture(event.pointerId);
      this.drag = this.at(event);
      this.select(this.drag, this.drag);
    });
    bar.addEventListener("pointermove", (event) => { if (this.drag !== null) this.select(this.drag, this.at(event)); });
    const end = (event) => {
      if (this.drag === null) return;
      this.select(this.drag, this.at(event));
      this.drag = null;
    };
    bar.addEventListener("pointerup", end);
    bar.addEventListener("pointercancel", end);
    $("timeline-day").addEventListener("change", (event) => this.load(event.target.value));
    $("clip").addEventListener("submit", (event) => { event.preventDefault(); this.export(); });
    this.load(null);
  },
  async export() {
    const from = parseLocal($("clip-from").value), to = parseLocal($("clip-to").value);
    if (!from || !to || to <= from) { say("Select a stretch on the timeline, or give From and To as YYYY-MM-DD HH:MM:SS.mmm, To after From."); return; }
    const link = $("clip-file");
    link.dataset.from = from.toISOString();
    link.dataset.to = to.toISOString();
    await exportJob(this.section.dataset.clips, {
      from: from.toISOString(), to: to.toISOString(), format: $("clip-format").value, gaps: $("clip-gaps").checked ? "silence" : "refuse",
    }, { button: $("clip-export"), progress: $("clip-progress"), link, player: $("clip-player") });
  },
};

document.addEventListener("DOMContentLoaded", () => { setupTransport(); setupTake(); timeline.setup(); });
