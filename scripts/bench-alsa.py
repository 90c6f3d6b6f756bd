"""The measuring half of scripts/bench-alsa (which starts the private PulseAudio daemon first):
tapedeck through the ALSA `pulse` device and `arecord -D pulse`, recording at the same time.

    python3 scripts/bench-alsa.py WORK TAPEDECK SECONDS ROUNDS
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import fmt, median, run_together  # noqa: E402

work, td, seconds, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

rounds_seen = []
for n in range(rounds):
    library = os.path.join(work, f"library-{n + 1}")
    ar_dir = os.path.join(work, f"arecord-{n + 1}")
    os.makedirs(library)
    os.makedirs(ar_dir)
    ar_file = os.path.join(ar_dir, "take.wav")
    tapedeck = {"cmd": [td, "record", "--config", "Configuration/ci.yaml", "--set", "capture.backend=alsa",
                        "--set", "capture.alsa.device=pulse", "--set", "format.sample-format=s24",
                        "--session", "bench", "--name", f"alsa {n + 1}", "--duration", f"{seconds}s", "--json"],
                "watch": library, "env": {"TAPEDECK_STORAGE_DIRECTORY_PATH": library}}
    arecord = {"cmd": ["arecord", "-q", "-D", "pulse", "-f", "S24_3LE", "-r", "48000", "-c", "2",
                       "-d", str(seconds), ar_file], "watch": ar_dir}
    t, a = run_together(work, [tapedeck, arecord])
    try:
        take = json.loads(t["stdout"])["take"]
    except (ValueError, KeyError):
        sys.exit(f"tapedeck record did not print its JSON report (exit {t['rc']}):\n{t['stdout']}")
    t["frames"], t["overruns"] = take["frames"], take["overruns"]
    a["frames"] = (os.path.getsize(ar_file) - 44) // 6
    rounds_seen.append((t, a))
    print(f"round {n + 1}: tapedeck {t['cpu']:.3f} s CPU, arecord {a['cpu']:.3f} s, "
          f"ratio {t['cpu'] / a['cpu']:.2f}x", file=sys.stderr, flush=True)


def col(i, key):
    return [r[i][key] for r in rounds_seen]


print(f"{seconds} s of 48 kHz/24-bit stereo, both recording at once; medians of {rounds} round(s)")
print(f"{'':26}{'tapedeck (alsa pulse)':>24}{'arecord -D pulse':>20}")
print(f"{'exit status (worst)':26}{max(col(0, 'rc')):>24}{max(col(1, 'rc')):>20}")
print(f"{'wall time':26}{fmt(median(col(0, 'wall'))):>24}{fmt(median(col(1, 'wall'))):>20}")
print(f"{'CPU user+sys':26}{fmt(median(col(0, 'cpu'))):>24}{fmt(median(col(1, 'cpu'))):>20}")
print(f"{'CPU each round':26}{' '.join(f'{x:.3f}' for x in col(0, 'cpu')):>24}"
      f"  {' '.join(f'{x:.3f}' for x in col(1, 'cpu')):>20}")
print(f"{'peak RSS':26}{fmt(median(col(0, 'rss')) / 1024, 'MiB', 1):>24}{fmt(median(col(1, 'rss')) / 1024, 'MiB', 1):>20}")
print(f"{'first frame after':26}{fmt(median(col(0, 'first'))):>24}{fmt(median(col(1, 'first'))):>20}")
print(f"{'frames each round':26}{'/'.join(map(str, col(0, 'frames'))):>24}  {'/'.join(map(str, col(1, 'frames'))):>20}")
print(f"{'overruns each round':26}{'/'.join(map(str, col(0, 'overruns'))):>24}{'(not reported)':>20}")
print()
ratios = [t["cpu"] / a["cpu"] for t, a in rounds_seen if a["cpu"] > 0]
ratio = median(ratios) if ratios else float("inf")
first = median(col(0, "first"))
checks = [
    (f"CPU ratio {ratio:.2f}x, the median of the rounds' {', '.join(f'{x:.2f}' for x in ratios)} (target <= 1.2x)",
     ratio <= 1.2),
    (f"overruns {sum(col(0, 'overruns'))} in all rounds (target 0)", all(o == 0 for o in col(0, "overruns"))),
    (f"length {seconds}.000 s in every round (target exact)", all(f == seconds * 48000 for f in col(0, "frames"))),
    (f"first frame {fmt(first)} (target < 0.3 s)", first is not None and first < 0.3),
    (f"RSS ratio {median(col(0, 'rss')) / median(col(1, 'rss')):.2f}x (informational)", True),
]
for text, ok in checks:
    print(("PASS  " if ok else "FAIL  ") + text)
sys.exit(0 if all(ok for _, ok in checks) else 1)
