"""The session page's timeline in Chromium, for scripts/test-web.

A logger's run (the null backend's counter, split every 5 s on the clock) is recorded with the
command line into a library of its own; `tapedeck serve` then shows its session. On the page the
test drags across the timeline's bar, exports the selection as WAV and downloads it: its length is
the selection's to the frame, and its samples are the counter from the selection's first frame
(each sample of the run is its own index, so a slip of one frame shows). The <audio> element plays
the same file. The API's refusals (a range with a gap, a malformed day) are checked against
docs/openapi.yaml with the rest of the run.
"""
import datetime
import io
import os
import shutil
import subprocess
import tempfile
import wave

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select

RATE = 48_000


def iso(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def counter(n):
    """The null backend's counter: interleaved sample n of a run."""
    return (n + 32768) % 65536 - 32768


def run(Server, driver, spec, wait, fail, binary, root, artifacts):
    home = tempfile.mkdtemp(prefix="tapedeck-web-timeline-")
    try:
        env = dict(os.environ, HOME=home, XDG_RUNTIME_DIR=os.path.join(home, "run"), XDG_CONFIG_HOME=os.path.join(home, "config"),
                   XDG_DATA_HOME=os.path.join(home, "data"), XDG_CACHE_HOME=os.path.join(home, "cache"))
        env.pop("TAPEDECK_CONFIG", None)
        recorded = subprocess.run([binary, "record", "-d", "20s", "--split", "5s", "--split-align", "--session", "Logger",
                                   "--config", os.path.join(root, "Configuration/ci.yaml"),
                                   "--set", "capture.null.signal=counter", "--set", "capture.null.paced=false", "--json"],
                                  env=env, capture_output=True, text=True)
        if recorded.returncode != 0:
            fail(f"recording the logger for the timeline: {recorded.stderr}")
        server = Server(home)
        try:
            check(server, driver, spec, wait, fail, artifacts)
        finally:
            server.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def check(server, driver, spec, wait, fail, artifacts):
    import json
    status, _, body = server.request("GET", "/api/sessions", spec=spec)
    sessions = json.loads(body)["sessions"]
    sid = next(s["id"] for s in sessions if s["name"] == "Logger")
    status, _, body = server.request("GET", f"/api/sessions/{sid}/timeline", spec=spec)
    if status != 200:
        fail(f"GET /api/sessions/{{id}}/timeline answered {status}: {body[:300]!r}")
    timeline = json.loads(body)
    if len(timeline["stretches"]) != 1 or len(timeline["stretches"][0]["takes"]) < 4 or timeline["gaps"]:
        fail(f"the split run is one stretch of its takes, with no gap: {timeline}")
    stretch = timeline["stretches"][0]
    start = iso(stretch["start"])
    status, _, body = server.request("GET", f"/api/sessions/{sid}/timeline?date=tomorrow", spec=spec)
    if status != 400 or b"YYYY-MM-DD" not in body:
        fail(f"a malformed day is refused, saying the form: {status} {body[:200]!r}")
    # A range reaching before the recording is refused with its gap, unless gaps are filled.
    before = (start - datetime.timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    status, _, body = server.request("POST", f"/api/sessions/{sid}/clips", {"from": before, "to": stretch["end"]},
                                     {"X-Tapedeck-Request": "1", "Content-Type": "application/json"}, spec=spec)
    if status != 422 or b"timeline-gap" not in body:
        fail(f"a range with a gap: {status} {body[:300]!r}")

    driver.get(f"{server.url}sessions/{sid}")
    bar = wait(driver, EC.presence_of_element_located((By.CSS_SELECTOR, "#timeline-bar[data-ready='true']")), "the timeline drawn")
    if len(driver.find_elements(By.CSS_SELECTOR, "#timeline-bar .stretch")) != 1:
        fail("the bar shows the one stretch")
    # Drag from a quarter of the bar to 65% of it.
    width = bar.size["width"]
    ActionChains(driver).move_to_element_with_offset(bar, int(-width * 0.25), 0).click_and_hold() \
        .move_by_offset(int(width * 0.2), 0).move_by_offset(int(width * 0.2), 0).release().perform()
    if driver.find_element(By.ID, "timeline-selection").get_attribute("hidden") is not None:
        fail("dragging across the bar shows the selection")
    if not driver.find_element(By.ID, "clip-from").get_attribute("value"):
        fail("dragging fills From and To")
    Select(driver.find_element(By.ID, "clip-format")).select_by_visible_text("wav")
    driver.find_element(By.ID, "clip-export").click()
    link = wait(driver, EC.visibility_of_element_located((By.ID, "clip-file")), "the exported selection's link", seconds=60)
    driver.save_screenshot(os.path.join(artifacts, "serve-timeline.png"))
    frm, to = iso(link.get_attribute("data-from")), iso(link.get_attribute("data-to"))
    if not (start < frm < to <= iso(stretch["end"])):
        fail(f"the selection {frm}..{to} lies inside the recording {stretch['start']}..{stretch['end']}")
    path = "/" + link.get_attribute("href").split("/", 3)[3]
    status, headers, data = server.request("GET", path, spec=spec)
    if status != 200:
        fail(f"downloading the selection: {status}")
    with wave.open(io.BytesIO(data)) as w:
        frames, channels = w.getnframes(), w.getnchannels()
        samples = memoryview(w.readframes(frames)).cast("h")
    a = round((frm - start).total_seconds() * RATE)
    b = round((to - start).total_seconds() * RATE)
    if abs(frames - (b - a)) > 1:
        fail(f"the file holds {frames} frames; the selection is {b - a}")
    # The selection's times are to the millisecond and the stretch's start to the microsecond: a
    # time that falls within a microsecond of half a frame may round to either frame. The file's
    # first frame, read from the counter, is the selection's or its neighbour; from there every
    # sample is the run's, none lost or doubled.
    first = next((f for f in (a, a - 1, a + 1) if samples[0] == counter(2 * f) and samples[1] == counter(2 * f + 1)), None)
    if first is None:
        fail(f"the file does not begin at the selection's first frame ({a}): its first sample is {samples[0]}, not {counter(2 * a)}")
    wrong = next((n for n in range(len(samples)) if samples[n] != counter(2 * first + n)), None)
    if wrong is not None:
        fail(f"the file is not the run's counter from frame {first}: sample {wrong} is {samples[wrong]}, not {counter(2 * first + wrong)}")
    x = (frm - start).total_seconds() * RATE
    if first != a:
        print(f"test-web: timeline: the selection began {x:.4f} frames into the run; the file at frame {first}")
    a = first
    duration = wait(driver, lambda d: d.execute_script("const p = document.getElementById('clip-player'); return p.duration > 0 ? p.duration : null;"),
                    "the player's duration")
    if abs(duration - frames / RATE) > 0.01:
        fail(f"the player's duration {duration} is the file's {frames / RATE}")
    print(f"test-web: timeline: dragged {frm.time()}..{to.time()}, exported {frames} frames, the counter from frame {a}")
