"""The measuring half of scripts/bench-pulse (which starts the private daemon and the pink noise).

    python3 scripts/bench-pulse.py WORK TAPEDECK SECONDS STOP_SECONDS ROUNDS HAVE_SOX_PULSE [KEY=VALUE ...]

Each KEY=VALUE becomes --set KEY=VALUE on every tapedeck recording.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import fmt, median, new_folder, run_together, soxi, tapedeck_report  # noqa: E402

work, td = sys.argv[1], sys.argv[2]
seconds, stop_after, rounds = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
have_sox = sys.argv[6] == "yes"
settings = [arg for kv in sys.argv[7:] for arg in ("--set", kv)]
server = os.environ["PULSE_SERVER"]
spec = ["--format=s24le", "--rate=48000", "--channels=2"]


def tapedeck(name, library, *extra, duration=True):
    cmd = [td, "record", "--config", "Configuration/ci.yaml", "--set", "capture.backend=pulse",
           "--set", f"capture.pulse.server={server}", "--set", "capture.pulse.device=null.monitor",
           "--set", "format.sample-format=s24", "--set", "format.sample-rate=48000", "--set", "format.channels=2",
           *settings, *extra, "--name", name, "--json"] + (["--duration", f"{seconds}s"] if duration else [])
    return {"cmd": cmd, "watch": library, "env": {"TAPEDECK_STORAGE_DIRECTORY_PATH": library}}


def folder(name):
    return new_folder(work, name)


report = tapedeck_report


cases = {"wav": [], "flac": [], "stop": []}
if settings:
    print("tapedeck records with " + " ".join(sys.argv[7:]), flush=True)
for n in range(1, rounds + 1):
    lib, other = folder(f"wav-lib-{n}"), folder(f"wav-others-{n}")
    t, p, a = run_together(work, [
        tapedeck(f"wav {n}", lib),
        {"cmd": ["parecord", "--device=null.monitor", *spec, "--file-format=wav", os.path.join(other, "parecord.wav")],
         "watch": other, "interrupt": True},
        {"cmd": ["arecord", "-q", "-D", "pulse", "-f", "S24_3LE", "-r", "48000", "-c", "2", "-d", str(seconds),
                 os.path.join(other, "arecord.wav")], "watch": other, "env": {"PULSE_SOURCE": "null.monitor"}},
    ], interrupt_after=seconds)
    t["overruns"] = report(t)["take"]["overruns"]
    cases["wav"].append((t, p, a))
    print(f"round {n} (a) WAV: tapedeck {t['cpu']:.3f} s CPU, parecord {p['cpu']:.3f} s, arecord -D pulse {a['cpu']:.3f} s",
          file=sys.stderr, flush=True)

    if have_sox:
        lib, other, plain = folder(f"flac-lib-{n}"), folder(f"flac-others-{n}"), folder(f"flac-noverify-lib-{n}")
        t, s, u = run_together(work, [
            tapedeck(f"flac {n}", lib, "--set", "encoder.name=flac", "--set", "encoder.flac.verify=true"),
            {"cmd": ["sox", "-q", "-t", "pulseaudio", "null.monitor", "-r", "48000", "-b", "24", "-c", "2", "-C", "5",
                     os.path.join(other, "sox.flac")], "watch": other, "interrupt": True},
            tapedeck(f"flac {n}", plain, "--set", "encoder.name=flac"),
        ], interrupt_after=seconds)
        t["overruns"] = report(t)["take"]["overruns"]
        u["overruns"] = report(u)["take"]["overruns"]
        cases["flac"].append((t, s, u))
        print(f"round {n} (b) FLAC: tapedeck {u['cpu']:.3f} s CPU (with verification: {t['cpu']:.3f} s), sox {s['cpu']:.3f} s",
              file=sys.stderr, flush=True)

    lib, other = folder(f"stop-lib-{n}"), folder(f"stop-others-{n}")
    parecord_file = os.path.join(other, "parecord.wav")
    t, p = run_together(work, [
        dict(tapedeck(f"ctrl-c {n}", lib, duration=False), interrupt=True),
        {"cmd": ["parecord", "--device=null.monitor", *spec, "--file-format=wav", parecord_file],
         "watch": other, "interrupt": True},
    ], interrupt_after=stop_after)
    take = report(t)["take"]
    cases["stop"].append({"tapedeck": soxi(take["path"]), "tapedeck_wall": t["interrupted_at"],
                          "parecord": soxi(parecord_file), "parecord_wall": p["interrupted_at"]})
    print(f"round {n} (c) Ctrl-C: tapedeck kept {cases['stop'][-1]['tapedeck']:.3f} s of {t['interrupted_at']:.3f} s, "
          f"parecord {cases['stop'][-1]['parecord']:.3f} s of {p['interrupted_at']:.3f} s", file=sys.stderr, flush=True)


def cpu(case, i):
    return median([r[i]["cpu"] for r in cases[case]])


def rss(case, i):
    return median([r[i]["rss"] for r in cases[case]]) / 1024


def row(label, case, i, overruns=True):
    c = cpu(case, i)
    each = " ".join(f"{r[i]['cpu']:.3f}" for r in cases[case])
    o = "/".join(str(r[i]["overruns"]) for r in cases[case]) if overruns else "-"
    print(f"{label:36}{c:9.3f}{c / seconds * 100:9.3f}{rss(case, i):9.1f}{o:>10}   {each}")


print(f"\n(a, b) {seconds} s of 48 kHz/24-bit stereo from null.monitor; tools of a case record at the same time; "
      f"medians of {rounds} round(s)")
print(f"{'':36}{'CPU s':>9}{'% core':>9}{'RSS MiB':>9}{'overruns':>10}   CPU each round")
row("tapedeck → WAV", "wav", 0)
row("parecord → WAV", "wav", 1, overruns=False)
row("arecord -D pulse → WAV", "wav", 2, overruns=False)
if have_sox:
    row("tapedeck → FLAC (level 5, default)", "flac", 2)
    row("tapedeck → FLAC (level 5, verify)", "flac", 0)
    row("sox -t pulseaudio → FLAC (-C 5)", "flac", 1, overruns=False)
else:
    print("sox → FLAC: skipped (sox has no pulseaudio driver; libsox-fmt-pulse could not be installed)")

print(f"\n(c) SIGINT after {stop_after} s: seconds of audio in the file / seconds from start to SIGINT")
for r in cases["stop"]:
    print(f"    tapedeck {r['tapedeck']:.3f} / {r['tapedeck_wall']:.3f}  (lost {r['tapedeck_wall'] - r['tapedeck']:+.3f})"
          f"      parecord {r['parecord']:.3f} / {r['parecord_wall']:.3f}  (lost {r['parecord_wall'] - r['parecord']:+.3f})")

print()
overruns = sum(r[0]["overruns"] for c in ("wav", "flac") for r in cases[c]) + sum(r[2]["overruns"] for r in cases["flac"])
# The take must hold the audio up to the stop request: the start-to-SIGINT time includes process
# start-up (about 0.1 s) before the first frame, so 0.25 s allows that with room to spare (the
# drain keeps every frame up to the stop, so no fragment is lost at the end).
lost = max(r["tapedeck_wall"] - r["tapedeck"] for r in cases["stop"])
checks = [
    (f"WAV: tapedeck {cpu('wav', 0):.3f} s below arecord-through-PulseAudio's {cpu('wav', 2):.3f} s "
     f"({cpu('wav', 0) / cpu('wav', 2):.2f}x; {cpu('wav', 0) / seconds * 100:.3f}% of a core)", cpu("wav", 0) < cpu("wav", 2)),
    (f"overruns {overruns} (target 0)", overruns == 0),
    (f"Ctrl-C: tapedeck lost at most {lost:.3f} s counted from its launch (start-up included; target < 0.25 s)", lost < 0.25),
]
if have_sox:
    # The default, as sox encodes: level 5 with the MD5 of the input, no decoding while recording.
    checks.insert(1, (f"FLAC: tapedeck {cpu('flac', 2):.3f} s below sox's {cpu('flac', 1):.3f} s "
                      f"({cpu('flac', 2) / cpu('flac', 1):.2f}x; with encoder.flac.verify=true: "
                      f"{cpu('flac', 0):.3f} s, {cpu('flac', 0) / cpu('flac', 1):.2f}x)", cpu("flac", 2) < cpu("flac", 1)))
for text, ok in checks:
    print(("PASS  " if ok else "FAIL  ") + text)
sys.exit(0 if all(ok for _, ok in checks) else 1)
