"""Shared by the reliability scripts (reliability-sigkill, -stops, -contention, -long, -powerloss):
the binary under test, the environment of a private library, and the independent checks of a
take's audio and of the SQLite catalog."""
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "Configuration", "ci.yaml")


def tapedeck_binary(script, tools=()):
    """The tapedeck binary to test (TAPEDECK_BIN, else the debug build); exits with what to do
    when it or one of `tools` is missing."""
    binary = os.environ.get("TAPEDECK_BIN", os.path.join(ROOT, ".build", "debug", "tapedeck"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"{script}: {binary} is missing; run `swift build` first.")
    for tool in tools:
        if shutil.which(tool) is None:
            sys.exit(f"{script}: {tool} is missing (scripts/install-deps installs it).")
    return binary


def default_stop_signals():
    """For subprocess.Popen(preexec_fn=...): the child starts with SIGINT, SIGTERM and SIGHUP at
    their default actions. A script run as a background job of another script inherits SIGINT
    ignored (and under nohup SIGHUP), children inherit that too, and tapedeck leaves a signal it
    was started with ignored alone, as Unix programs do."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def library_env(library, storage="directory", drop=("TAPEDECK_",), **extra):
    """This process's environment without Tapedeck's (and `drop`'s) variables, with the CI config
    and `library` as the storage's path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop))}
    env.update(TAPEDECK_CONFIG=CONFIG, TAPEDECK_STORAGE_BACKEND=storage,
               **{f"TAPEDECK_STORAGE_{storage.upper()}_PATH": library}, **extra)
    return env


def audio_problem(path, frames):
    """None if an independent reader reads the file at `path` whole with exactly `frames` frames,
    else what is wrong: python's wave for RIFF (and every byte the header claims must be there),
    sox for RF64 (python's wave reads only RIFF), `flac -t` without a warning and metaflac for
    FLAC (an empty FLAC file cannot say "0 samples", so then flac's note about it is allowed)."""
    if not os.path.exists(path):
        return "its file is missing"
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"RF64":
        info = subprocess.run(["sox", "--i", "-s", path], capture_output=True, text=True)
        decode = subprocess.run(["sox", path, "-n"], capture_output=True, text=True)
        if info.returncode != 0 or decode.returncode != 0 or decode.stderr.strip():
            return f"sox refuses it: {(info.stderr + decode.stderr).strip()[-200:]}"
        found = int(info.stdout.strip())
    elif path.endswith(".wav"):
        try:
            with wave.open(path, "rb") as w:
                found = w.getnframes()
                raw = w.readframes(found)
                if len(raw) != found * w.getsampwidth() * w.getnchannels():
                    return f"the header claims {found} frames but the file holds {len(raw)} bytes of audio"
        except (wave.Error, EOFError) as e:
            return f"python's wave refuses it: {e}"
    else:
        strict = ["-w"] if frames else []
        r = subprocess.run(["flac", "-t", "-s"] + strict + [path], capture_output=True, text=True)
        if r.returncode != 0:
            return f"flac -t: {r.stderr.strip()[-200:]}"
        m = subprocess.run(["metaflac", "--show-total-samples", path], capture_output=True, text=True)
        found = int(m.stdout.strip() or -1)
    if found != frames:
        return f"it holds {found} frames, the catalog says {frames}"
    return None


def integrity_problem(library):
    """None if the library has no SQLite catalog or it passes `PRAGMA integrity_check`."""
    catalog = os.path.join(library, "catalog.sqlite")
    if not os.path.exists(catalog):
        return None
    try:
        db = sqlite3.connect(catalog)
        try:
            result = db.execute("PRAGMA integrity_check").fetchall()
        finally:
            db.close()
    except sqlite3.Error as e:
        return f"the catalog cannot be opened: {e}"
    return None if result == [("ok",)] else f"SQLite's integrity check: {result[:3]}"
