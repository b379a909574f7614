"""A class arriving at once on the course hub: every learner logs in within a minute, opens JupyterLab, fetches an
assignment, runs a cell in a kernel and submits; then the instructor collects and grades them all.

    python benchmarks/class_arrival.py [--learners 30] [--within 60] [--assignment 02-attention] [--keep]

As root, on loopback only: a hub of its own under a scratch folder in /opt (classroom/hub/'s own set-up, each learner
within the limits and disk make hub gives this machine, each home 256 MiB here), ``--learners`` throw-away accounts
and an instructor, removed afterwards with everything the hub started. Prints, for each step, its p50 and p95 over
the class (seconds): log-in to JupyterLab (the hub's form, the server's start, the lab's page), fetch, the first
cell (a new kernel importing torch and course_lib), submit; then collect and grading; and what one learner's arrival
costs: CPU seconds (their server and kernel, and the hub's and proxy's share) and memory (their control group's
peak), with the hub's own; and from those, how many learners a machine of N cores and M GiB takes in one minute.

tests/hub/test_hub.py runs :func:`arrive` for a small class on its own hub (the suite's budget); this script is for
whole classes. ``--json FILE`` writes every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import csv
import json
import os
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

COURSE_ID = "transformers-course"
CELL = "import torch, course_lib\nprint('ready', torch.__version__)"


@dataclass
class Arrival:
    """One learner's way in: each step's seconds, or the step it failed at and why."""

    user: str
    steps: dict[str, float] = field(default_factory=dict)
    failed: str = ""


def _cookies(s: requests.Session, user: str) -> str:
    return "; ".join(f"{c.name}={c.value}" for c in s.cookies if c.domain in (f"{user}.localhost", ".localhost"))


async def _run_cell(url: str, cookies: str, origin: str, user: str, code: str, timeout: float) -> str:
    from tools.lab_client import execute  # the repository is on sys.path once main() has run

    out = await execute(url, cookies, origin, user, code, timeout)
    return out["stdout"] + out["stderr"]


def arrive_one(base: str, port: int, user: str, password: str, admin: dict, assignment: str,
               timeout: float = 300) -> Arrival:
    """One learner's way in, as their browser makes it; the time of each step."""
    got = Arrival(user)
    s = requests.Session()
    step, t0 = "log-in to lab", time.monotonic()
    try:
        s.get(f"{base}/hub/login", timeout=timeout)
        r = s.post(f"{base}/hub/login?next=", timeout=timeout, allow_redirects=False,
                   data={"username": user, "password": password, "_xsrf": s.cookies.get("_xsrf", path="/hub/")})
        if r.status_code != 302:
            raise RuntimeError(f"the hub's form answered {r.status_code}")
        s.get(f"{base}/hub/spawn", timeout=timeout)
        # the spawn-pending page's wait, as a browser waits: one event stream of the spawn's progress (polling the
        # hub's API for every learner twice a second would cost the hub more CPU than the spawns themselves)
        ready, last = False, ""
        with s.get(f"{base}/hub/api/users/{user}/server/progress", stream=True, timeout=timeout) as events:
            for line in events.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    last = line[5:].strip()
                    event = json.loads(last)
                    if event.get("ready") or event.get("failed"):
                        ready = bool(event.get("ready"))
                        break
                if time.monotonic() - t0 > timeout:
                    break
        if not ready:
            server = requests.get(f"{base}/hub/api/users/{user}", headers=admin, timeout=timeout).json()
            if not server.get("servers", {}).get("", {}).get("ready"):
                raise RuntimeError(f"the server did not start: {last[:300]}")
        home = f"http://{user}.localhost:{port}/user/{user}"
        r = s.get(f"{home}/lab", timeout=timeout)
        if r.status_code != 200:
            raise RuntimeError(f"the lab answered {r.status_code}")
        got.steps[step] = time.monotonic() - t0
        xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", domain=f"{user}.localhost", path=f"/user/{user}/") or ""}
        for step, action in (("fetch", "fetch"), ("first cell", None), ("submit", "submit")):
            t = time.monotonic()
            if action:
                r = s.post(f"{home}/assignments/{action}", headers=xsrf, timeout=timeout,
                           data={"course_id": COURSE_ID, "assignment_id": assignment})
                if r.status_code != 200 or not r.json().get("success"):
                    raise RuntimeError(f"{action}: {r.status_code} {r.text[:300]}")
            else:
                r = s.post(f"{home}/api/kernels", headers=xsrf, json={"name": "python3"}, timeout=timeout)
                if r.status_code != 201:
                    raise RuntimeError(f"a kernel: {r.status_code} {r.text[:300]}")
                url = f"ws://{user}.localhost:{port}/user/{user}/api/kernels/{r.json()['id']}/channels"
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    out = pool.submit(asyncio.run, _run_cell(url, _cookies(s, user), f"http://{user}.localhost:{port}",
                                                             user, CELL, timeout)).result()
                if "ready" not in out:
                    raise RuntimeError(f"the cell gave {out[:300]!r}")
            got.steps[step] = time.monotonic() - t
    except Exception as exc:  # noqa: BLE001 - one learner's failure is a finding, not the end of the run
        got.failed = f"{step}: {type(exc).__name__}: {exc}"
    return got


def arrive(base: str, port: int, passwords: dict[str, str], admin: dict, assignment: str, within_s: float = 60,
           seed: int = 0, timeout: float = 300) -> list[Arrival]:
    """Every learner of ``passwords`` arrives at a random moment within ``within_s`` seconds, each on a thread of
    its own; their arrivals, in the order of ``passwords``."""
    rng = random.Random(seed)
    offsets = {user: rng.uniform(0, within_s) for user in passwords}
    start = time.monotonic()

    def one(user: str) -> Arrival:
        time.sleep(max(0.0, start + offsets[user] - time.monotonic()))
        return arrive_one(base, port, user, passwords[user], admin, assignment, timeout)

    with concurrent.futures.ThreadPoolExecutor(len(passwords)) as pool:
        return list(pool.map(one, passwords))


def percentiles(arrivals: list[Arrival]) -> dict[str, dict[str, float]]:
    """Each step's p50 and p95 (seconds) over the learners who got through it."""
    out = {}
    for step in ("log-in to lab", "fetch", "first cell", "submit"):
        times = sorted(a.steps[step] for a in arrivals if step in a.steps)
        if times:
            q = statistics.quantiles(times, n=20, method="inclusive") if len(times) > 1 else [times[0]] * 19
            out[step] = {"p50": round(statistics.median(times), 2), "p95": round(q[18], 2), "max": round(times[-1], 2)}
    return out


class Sampler:
    """The machine's memory in use and its load, every second, in a thread; the peak and the mean."""

    def __init__(self):
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            info = {line.split(":")[0]: int(line.split()[1]) for line in open("/proc/meminfo")}
            used = (info["MemTotal"] - info["MemAvailable"]) * 1024
            self.samples.append((time.monotonic(), used, os.getloadavg()[0]))
            self._stop.wait(1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        used = [s[1] for s in self.samples] or [0]
        load = [s[2] for s in self.samples] or [0]
        return {"memory_used_peak_gib": round(max(used) / 2**30, 2), "memory_used_start_gib": round(used[0] / 2**30, 2),
                "load_peak": round(max(load), 1)}


def cpu_seconds(pids: set[int], children: bool = True) -> float:
    """The CPU time (user and system) the processes ``pids`` have used so far, with (``children``) their reaped
    children's."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15 if children else 13])  # utime stime (cutime cstime)
    return total / tick


def costs(prefix: Path, learners: list[str]) -> dict:
    """What the learners' arrivals cost, from the hub's control groups: each learner's CPU and memory peak, the
    hub's and proxy's CPU and memory now."""
    from classroom.hub.cgroups import HubGroups

    groups = HubGroups(prefix)
    per = {}
    for user in learners:
        used = groups.usage("learners", user)
        per[user] = {"cpu_s": cpu_seconds(groups.pids("learners", user)), "memory_peak": used["memory_peak"] or 0}
    hub = groups.usage("hub")
    # the hub's own (a server the hub reaps adds its time to the hub's children's: not the hub's)
    return {"learners": per, "hub_cpu_s": cpu_seconds(groups.pids("hub"), children=False),
            "hub_memory_peak": hub["memory_peak"] or 0}


def rule(cpu_per_learner: float, memory_per_learner: float, hub_memory: float) -> str:
    """How many learners a machine takes arriving in one minute, from one arrival's CPU and memory."""
    per_core = 60 / cpu_per_learner
    return (f"one arrival costs {cpu_per_learner:.1f} CPU-seconds and {memory_per_learner / 2**30:.2f} GiB: a machine "
            f"of N cores and M GiB takes about {per_core:.0f} x N learners arriving in one minute (all its cores on "
            f"them), and at most (M - {hub_memory / 2**30 + 2:.1f}) / {memory_per_learner / 2**30:.2f} learners "
            "working at once")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--within", type=float, default=60, help="every learner arrives within this many seconds")
    parser.add_argument("--assignment", default="02-attention")
    parser.add_argument("--disk", default="256M", help="each learner's home (make hub's HUB_DISK)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--log", type=Path, default=None, help="keep a copy of the hub's log here")
    parser.add_argument("--keep", action="store_true", help="leave the hub, accounts and folder (to look around)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run it as root: it makes accounts and starts a hub")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "hub"))
    import pwd
    import shutil
    import subprocess
    import tempfile

    from classroom.hub import service
    from classroom.hub.accounts import add_users
    from classroom.hub.cgroups import parse_size
    from classroom.hub.disks import Disks, DiskSizes
    from classroom.hub.layout import Groups, Layout
    from classroom.hub.setup import setup

    tag = "".join(random.Random().choices("abcdefghijklmnopqrstuvwxyz", k=4))
    learners = [f"ca{tag}{i:02d}" for i in range(args.learners)]
    instructor = f"ci{tag}"
    groups = Groups(f"cl{tag}", f"ci{tag}g")
    prefix = Path(tempfile.mkdtemp(prefix="course-arrival-", dir="/opt"))
    prefix.chmod(0o755)
    layout = Layout(prefix / "hub")
    port = service.free_port()
    base = f"http://localhost:{port}"
    report: dict = {"learners": args.learners, "within_s": args.within, "cores": os.cpu_count()}
    import socket as _socket

    real = _socket.getaddrinfo

    def getaddrinfo(host, *a, **k):  # *.localhost is loopback (RFC 6761); glibc here does not know it
        return real("127.0.0.1" if isinstance(host, str) and host.endswith(".localhost") else host, *a, **k)

    _socket.getaddrinfo = getaddrinfo
    try:
        t = time.monotonic()
        setup(layout)
        layout.state.mkdir(exist_ok=True)
        Disks(layout).remember(DiskSizes(home=parse_size(args.disk, "--disk"), exchange=max(
            256 * 2**20, args.learners * 16 * 2**20)))
        roster = prefix / "roster.csv"
        roster.write_text("id,name,email\n" + "".join(f"{u},{u},\n" for u in learners))
        add_users(layout, roster, instructor, groups)
        service.start(layout, port, groups=groups)
        report["setup_s"] = round(time.monotonic() - t, 1)
        passwords = {r["id"]: r["password"] for r in csv.DictReader((layout.state / "passwords.csv").open())}
        token = (layout.state / "course-admin-token").read_text().strip()
        admin = {"Authorization": f"token {token}"}
        home = Path(pwd.getpwnam(instructor).pw_dir)
        env = layout.env / "bin"
        as_instructor = ["runuser", "-u", instructor, "--", "env", "-i", f"HOME={home}", f"USER={instructor}",
                         "LANG=C.UTF-8", f"PATH={env}:/usr/bin:/bin"]
        subprocess.run([*as_instructor, "nbgrader", "release_assignment", args.assignment], cwd=home / "course",
                       check=True, capture_output=True)
        hub_cpu_before = costs(layout.prefix, [])["hub_cpu_s"]
        with Sampler() as sampler:
            t = time.monotonic()
            arrivals = arrive(base, port, {u: passwords[u] for u in learners}, admin, args.assignment,
                              args.within, args.seed)
            report["arrival_s"] = round(time.monotonic() - t, 1)
        spent = costs(layout.prefix, learners)
        report["machine"] = sampler.summary()
        report["failed"] = {a.user: a.failed for a in arrivals if a.failed}
        report["steps"] = percentiles(arrivals)
        through = [u for u in learners if u not in report["failed"]]
        cpu = [spent["learners"][u]["cpu_s"] for u in through]
        mem = [spent["learners"][u]["memory_peak"] for u in through]
        hub_cpu = spent["hub_cpu_s"] - hub_cpu_before
        if through:
            report["per_learner"] = {
                "cpu_s_median": round(statistics.median(cpu), 2), "cpu_s_max": round(max(cpu), 2),
                "hub_cpu_s_each": round(hub_cpu / len(through), 2),
                "memory_peak_gib_median": round(statistics.median(mem) / 2**30, 3),
                "memory_peak_gib_max": round(max(mem) / 2**30, 3)}
            report["hub_memory_peak_gib"] = round(spent["hub_memory_peak"] / 2**30, 3)
            report["rule"] = rule(statistics.median(cpu) + hub_cpu / len(through), statistics.median(mem),
                                  spent["hub_memory_peak"])
        for step, cmd in (("collect", ["nbgrader", "collect", args.assignment]),
                          ("grade", ["python", "-m", "classroom.grade"])):
            t = time.monotonic()
            res = subprocess.run([*as_instructor, *cmd], cwd=home / "course", capture_output=True, text=True)
            report[f"{step}_s"] = round(time.monotonic() - t, 1)
            if res.returncode != 0:
                report[f"{step}_failed"] = (res.stdout + res.stderr)[-2000:]
        grades = list(csv.DictReader((home / "course" / "grades.csv").open())) if (home / "course" /
                                                                                   "grades.csv").is_file() else []
        report["graded"] = sum(1 for g in grades if g.get("status", "").startswith("graded"))
    finally:
        if args.log and (layout.state / "jupyterhub.log").is_file():
            shutil.copy(layout.state / "jupyterhub.log", args.log)
        if not args.keep:
            service.stop(layout)
            for user in [*learners, instructor]:
                subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
            time.sleep(0.5)
            for user in [*learners, instructor]:
                subprocess.run(["userdel", "--remove", "--force", user], capture_output=True)
            for group in (groups.learners, groups.instructors):
                subprocess.run(["groupdel", group], capture_output=True)
            shutil.rmtree(prefix, ignore_errors=True)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if not report["failed"] and report.get("graded") == len(learners) else 1


if __name__ == "__main__":
    sys.exit(main())
