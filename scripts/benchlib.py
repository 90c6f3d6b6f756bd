"""Shared by the recording benchmarks (bench-alsa, bench-pulse): start several recorders at the
same moment and measure each one's CPU (user+sys from its rusage, which Linux keeps to the
nanosecond of run time), peak RSS, time to the first captured frame, and wall time."""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from reliabilitylib import default_stop_signals


def audio_files(root):
    """Files under root that can hold audio (not the catalog, not lock files)."""
    for d, _, names in os.walk(root):
        for n in names:
            if "catalog" in n or n.endswith(".lock"):
                continue
            yield os.path.join(d, n)


def run_together(work, jobs, interrupt_after=None):
    """Starts every job at once. A job is a dict with "cmd" (argv), "watch" (a folder whose first
    file past 1 KiB marks the first frame) and optionally "env" and "interrupt" (True: send SIGINT
    after interrupt_after seconds). Returns one dict per job with cpu (s), rss (KiB), first (s or
    None), wall (s), rc (exit status), stdout (text), the end of stderr and interrupted_at (s from
    its start)."""
    runs = []
    for i, job in enumerate(jobs):
        out = open(os.path.join(work, f"job{len(runs)}-{time.monotonic_ns()}.out"), "w+")
        err = open(out.name + ".err", "w+")
        env = dict(os.environ, **job.get("env", {}))
        runs.append({"job": job, "out": out, "err": err, "start": time.monotonic(), "first": None, "done": False,
                     "interrupted_at": None,
                     "p": subprocess.Popen(job["cmd"], stdout=out, stderr=err, env=env,
                                           preexec_fn=default_stop_signals)})
    while not all(r["done"] for r in runs):
        now = time.monotonic()
        for r in runs:
            if r["done"]:
                continue
            pid, status, usage = os.wait4(r["p"].pid, os.WNOHANG)
            if pid == r["p"].pid:
                r.update(done=True, wall=time.monotonic() - r["start"], cpu=usage.ru_utime + usage.ru_stime,
                         rss=usage.ru_maxrss, rc=os.waitstatus_to_exitcode(status))
                r["out"].seek(0)
                r["stdout"] = r["out"].read()
                r["err"].seek(0)
                r["stderr"] = r["err"].read()[-2000:]
                continue
            if (r["job"].get("interrupt") and r["interrupted_at"] is None
                    and now - r["start"] >= interrupt_after):
                r["p"].send_signal(signal.SIGINT)
                r["interrupted_at"] = time.monotonic() - r["start"]
            if r["first"] is None:
                for f in audio_files(r["job"]["watch"]):
                    try:
                        if os.stat(f).st_size > 1024:
                            r["first"] = time.monotonic() - r["start"]
                            break
                    except FileNotFoundError:
                        pass
        waiting = any(r["first"] is None and not r["done"] for r in runs)
        time.sleep(0.001 if waiting else 0.01)
    return [{k: r[k] for k in ("cpu", "rss", "first", "wall", "rc", "stdout", "stderr", "interrupted_at")} for r in runs]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(x, unit="s", digits=3):
    return "n/a" if x is None else f"{x:.{digits}f} {unit}"


def new_folder(work, name):
    """A new folder WORK/NAME."""
    path = os.path.join(work, name)
    os.makedirs(path)
    return path


def tapedeck_report(job):
    """The JSON report a `tapedeck record --json` job printed; exits naming what went wrong when none."""
    try:
        return json.loads(job["stdout"])
    except ValueError:
        sys.exit(f"tapedeck record did not print its JSON report (exit {job['rc']}):\n{job['stdout']}{job.get('stderr', '')}")


def soxi(path):
    """An audio file's duration in seconds, as sox reads it."""
    return float(subprocess.run(["soxi", "-D", path], capture_output=True, text=True, check=True).stdout)


def start_rclone_s3(work, key, secret, bucket="bench"):
    """A private `rclone serve s3` on loopback, file-backed in WORK/data (with the bucket's
    folder made), its folder cache at 1 s. Returns (process, endpoint, the bucket's folder)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    data = os.path.join(work, "data")
    os.makedirs(os.path.join(data, bucket))
    server = subprocess.Popen(["rclone", "serve", "s3", "--addr", f"127.0.0.1:{port}", "--auth-key", f"{key},{secret}",
                               "--config", "/dev/null", "--dir-cache-time", "1s", data],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}", os.path.join(data, bucket)


class Postgres:
    """A private PostgreSQL (Debian's, the newest installed) in WORK/pg: initdb with trust for
    the user `tapedeck`, a database `tapedeck`, listening on a Unix socket in that folder only
    (as the `postgres` user when run as root). `url` is what sync.catalog.postgres takes;
    `psql(sql)` runs SQL; `stop()` ends it."""

    def __init__(self, work):
        versions = sorted(int(v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()) if os.path.isdir("/usr/lib/postgresql") else []
        if not versions:
            sys.exit("PostgreSQL is missing: apt-get install postgresql (scripts/install-deps installs it).")
        self.bin = f"/usr/lib/postgresql/{versions[-1]}/bin"
        self.folder = os.path.join(work, "pg")
        os.makedirs(self.folder)
        self.as_user = []
        if os.getuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            os.chown(self.folder, pw.pw_uid, pw.pw_gid)
            os.chmod(work, 0o755)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.port = 25432
        self.data = os.path.join(self.folder, "data")
        self._run("initdb", "-D", self.data, "-U", "tapedeck", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
        options = f"-k {self.folder} -c listen_addresses='' -p {self.port}"
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l", os.path.join(self.folder, "log"), "-w", "start")
        self._run("createdb", "-h", self.folder, "-p", str(self.port), "-U", "tapedeck", "tapedeck")
        self.url = f"postgres://tapedeck@/tapedeck?host={self.folder}&port={self.port}"

    def _run(self, program, *args, stdin=None):
        return subprocess.run(self.as_user + [os.path.join(self.bin, program), *args], check=True, input=stdin,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout

    def psql_command(self, sql):
        return self.as_user + [os.path.join(self.bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                               "-h", self.folder, "-p", str(self.port), "-U", "tapedeck", "-d", "tapedeck", "-c", sql]

    def psql(self, sql):
        return subprocess.run(self.psql_command(sql), check=True, capture_output=True, text=True).stdout

    def stop(self):
        subprocess.run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
