"""The measuring half of scripts/bench-pipewire (which starts the private PipeWire and the sine).

    python3 scripts/bench-pipewire.py WORK TAPEDECK SECONDS STOP_SECONDS ROUNDS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import fmt, median, new_folder, run_together, soxi, tapedeck_report  # noqa: E402

work, td = sys.argv[1], sys.argv[2]
seconds, stop_after, rounds = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def tapedeck(name, library, duration=True):
    cmd = [td, "record", "--config", "Configuration/ci.yaml", "--set", "capture.backend=pipewire",
           "--set", "capture.pipewire.device=bench-sink",
           "--set", "format.sample-format=s24", "--set", "format.sample-rate=48000", "--set", "format.channels=2",
           "--name", name, "--json"] + (["--duration", f"{seconds}s"] if duration else [])
    return {"cmd": cmd, "watch": library, "env": {"TAPEDECK_STORAGE_DIRECTORY_PATH": library}}


def pw_record(folder):
    # pw-record has no length option: (a) stops it with SIGINT after SECONDS.
    cmd = ["pw-record", "--target", "bench-sink", "-P", "{ stream.capture.sink=true }", "--rate", "48000",
           "--channels", "2", "--format", "s24", os.path.join(folder, "pw-record.wav")]
    return {"cmd": cmd, "watch": folder, "interrupt": True}


def folder(name):
    return new_folder(work, name)


report = tapedeck_report


cases = {"wav": [], "stop": []}
for n in range(1, rounds + 1):
    # Alternate which starts first.
    lib, other = folder(f"wav-lib-{n}"), folder(f"wav-others-{n}")
    jobs = [tapedeck(f"wav {n}", lib), pw_record(other)]
    results = run_together(work, jobs if n % 2 else jobs[::-1], interrupt_after=seconds)
    t, j = results if n % 2 else results[::-1]
    t["overruns"] = report(t)["take"]["overruns"]
    t["seconds"] = report(t)["take"]["seconds"]
    j["seconds"] = soxi(os.path.join(other, "pw-record.wav"))
    cases["wav"].append((t, j))
    print(f"round {n} (a) WAV: tapedeck {t['cpu']:.3f} s CPU, first frame {fmt(t['first'])}; "
          f"pw-record {j['cpu']:.3f} s, first frame {fmt(j['first'])}", file=sys.stderr, flush=True)

    lib, other = folder(f"stop-lib-{n}"), folder(f"stop-others-{n}")
    jobs = [dict(tapedeck(f"ctrl-c {n}", lib, duration=False), interrupt=True), pw_record(other)]
    results = run_together(work, jobs if n % 2 else jobs[::-1], interrupt_after=stop_after)
    t, j = results if n % 2 else results[::-1]
    take = report(t)["take"]
    cases["stop"].append({"tapedeck": soxi(take["path"]), "tapedeck_wall": t["interrupted_at"], "tapedeck_first": t["first"],
                          "pw_record": soxi(os.path.join(other, "pw-record.wav")), "pw_record_wall": j["interrupted_at"],
                          "pw_record_first": j["first"]})
    c = cases["stop"][-1]
    print(f"round {n} (b) Ctrl-C: tapedeck kept {c['tapedeck']:.3f} s of {c['tapedeck_wall']:.3f} s, "
          f"pw-record {c['pw_record']:.3f} s of {c['pw_record_wall']:.3f} s", file=sys.stderr, flush=True)


def col(i, key):
    return median([r[i][key] for r in cases["wav"]])


print(f"\n(a) {seconds} s of 48 kHz/24-bit stereo from a null sink's monitor (a sine), both recording at once; "
      f"medians of {rounds} round(s)")
print(f"{'':16}{'CPU s':>9}{'CPU s/min':>11}{'RSS MiB':>9}{'first frame':>13}{'audio s':>10}{'overruns':>10}   CPU each round")
for i, label in ((0, "tapedeck"), (1, "pw-record")):
    cpu = col(i, "cpu")
    each = " ".join(f"{r[i]['cpu']:.3f}" for r in cases["wav"])
    o = "/".join(str(r[i]["overruns"]) for r in cases["wav"]) if i == 0 else "-"
    print(f"{label:16}{cpu:9.3f}{cpu / seconds * 60:11.3f}{col(i, 'rss') / 1024:9.1f}{fmt(col(i, 'first')):>13}"
          f"{col(i, 'seconds'):10.3f}{o:>10}   {each}")

print(f"\n(b) SIGINT after {stop_after} s: seconds of audio in the file / seconds from start to SIGINT "
      "(the difference includes the start-up before the first frame)")
for r in cases["stop"]:
    print(f"    tapedeck {r['tapedeck']:.3f} / {r['tapedeck_wall']:.3f}  (lost {r['tapedeck_wall'] - r['tapedeck']:+.3f}, "
          f"first frame at {fmt(r['tapedeck_first'])})      pw-record {r['pw_record']:.3f} / {r['pw_record_wall']:.3f}  "
          f"(lost {r['pw_record_wall'] - r['pw_record']:+.3f}, first frame at {fmt(r['pw_record_first'])})")

overruns = sum(r[0]["overruns"] for r in cases["wav"])
lost = max(r["tapedeck_wall"] - r["tapedeck"] for r in cases["stop"])
exact = all(abs(r[0]["seconds"] - seconds) < 1e-9 for r in cases["wav"])
checks = [
    (f"CPU: tapedeck {col(0, 'cpu') / seconds * 60:.3f} s per recorded minute, pw-record {col(1, 'cpu') / seconds * 60:.3f} s", True),
    (f"overruns counted by tapedeck: {overruns} (audio the graph never delivered; target 0)", overruns == 0),
    (f"-d {seconds}: every tapedeck take exactly {seconds} s", exact),
    (f"Ctrl-C: tapedeck lost at most {lost:.3f} s counted from its launch (start-up included; target < 0.25 s)", lost < 0.25),
]
print()
for text, ok in checks:
    print(("PASS " if ok else "FAIL ") + text)
sys.exit(0 if all(ok for _, ok in checks) else 1)
