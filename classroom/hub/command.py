"""``make hub``, ``make hub-users``, ``make hub-stop``: the hub's command line (``python -m classroom.hub``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from classroom.hub.accounts import add_users
from classroom.hub.cgroups import Limits, default_limits, parse_size
from classroom.hub.disks import DiskSizes, sizes_from
from classroom.hub.layout import DEFAULT_PREFIX, HubError, Layout
from classroom.hub.service import start, stop
from classroom.hub.setup import setup


def limits_from(args: argparse.Namespace) -> Limits | None:
    """The limits make hub's options ask for, each left out one this machine's default (None: HUB_LIMITS=none)."""
    if args.limits == "none":
        return None
    if args.limits not in ("", "on"):
        raise HubError(f"HUB_LIMITS={args.limits!r}: leave it out for the limits, or none to run without them")
    chosen = default_limits().to_dict()
    try:
        for name, option in (("memory", "HUB_MEMORY"), ("class_memory", "HUB_CLASS_MEMORY"),
                             ("instructor_memory", "HUB_INSTRUCTOR_MEMORY")):
            if getattr(args, name):
                chosen[name] = parse_size(getattr(args, name), option)
        if args.cpus:
            chosen["cpus"] = float(args.cpus)
        if args.tasks:
            chosen["tasks"] = int(args.tasks)
        return Limits(**chosen)
    except ValueError as exc:
        raise HubError(str(exc)) from None


def disks_from(args: argparse.Namespace) -> DiskSizes | str | None:
    """The disk sizes make hub's options ask for (None: HUB_DISK=none)."""
    from classroom.hub.service import MACHINE

    if args.disk == "none":
        return None
    if not args.disk and not args.exchange_disk:
        return MACHINE  # the sizes it was last started with, else this machine's defaults
    return sizes_from(args.disk, args.exchange_disk)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns its exit status."""
    import classroom.hub

    parser = argparse.ArgumentParser(prog="make hub", description=classroom.hub.__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "users", "start", "stop"):
        p = sub.add_parser(name)
        p.add_argument("--prefix", type=Path, default=Path(os.environ.get("HUB_PREFIX") or DEFAULT_PREFIX))
        if name == "users":
            p.add_argument("--roster", type=Path, default=None, help="the class list: id,name,email")
            p.add_argument("--instructor", default=None, help="the instructor's account name")
        if name == "start":
            p.add_argument("--port", type=int, default=8000)
            p.add_argument("--auth", default="pam", help="pam (default) or shared")
            p.add_argument("--idle-minutes", type=float, default=60, help="stop a server idle this long")
            p.add_argument("--url", default="", help="where browsers reach the hub (http://localhost:PORT)")
            p.add_argument("--memory", default="", help="each learner's memory, server and kernels together (2G)")
            p.add_argument("--cpus", default="", help="each learner's CPUs (1)")
            p.add_argument("--tasks", default="", help="each learner's processes and threads (512)")
            p.add_argument("--class-memory", default="", help="all learners' memory together")
            p.add_argument("--instructor-memory", default="", help="an instructor's server and grading (6G)")
            p.add_argument("--limits", default="", help="none: no limits (not for a class)")
            p.add_argument("--disk", default="", help="each learner's home, a filesystem of this size (1G); none: "
                           "unbounded (not for a class)")
            p.add_argument("--exchange-disk", default="", help="the exchange's filesystem (8G)")
    args = parser.parse_args(argv)
    layout = Layout(args.prefix.resolve())
    try:
        if args.command == "setup":
            for line in setup(layout):
                print(f"make hub: {line}")
        elif args.command == "users":
            if args.roster is not None and not args.roster.is_file():
                raise HubError(f"ROSTER={args.roster} does not exist or is not a file")
            if args.roster is None and args.instructor is None:
                raise HubError("nothing to add: give ROSTER=roster.csv (id,name,email) and/or INSTRUCTOR=<name>")
            for line in add_users(layout, args.roster, args.instructor):
                print(f"make hub-users: {line}")
        elif args.command == "start":
            if args.idle_minutes <= 0:
                raise HubError(f"IDLE_MINUTES={args.idle_minutes} must be a positive number of minutes")
            said: list[str] = []
            url = args.url or f"http://localhost:{args.port}"
            pid = start(layout, args.port, args.auth, int(args.idle_minutes * 60), limits=limits_from(args),
                        public_url=url, report=said, disks=disks_from(args))
            for line in said:
                print(f"make hub: {line}")
            print(f"make hub: JupyterHub is running (process {pid}) at {url}/ (log: {layout.state / 'jupyterhub.log'})")
            if args.auth == "shared":
                print(f"make hub: the learners' shared password is in {layout.state / 'shared-password'}, the "
                      f"instructors' in {layout.state / 'shared-admin-password'}")
        elif args.command == "stop":
            stopped = stop(layout)
            if not stopped:
                print("make hub-stop: no hub was running, and nothing it started was left")
            elif not stopped[0].startswith("the hub "):
                print("make hub-stop: the hub was not running (killed?); stopped what it had left running:")
            else:
                print("make hub-stop: stopped")
            for line in stopped:
                print(f"  {line}")
    except HubError as exc:
        print(f"make hub: {exc}", file=sys.stderr)
        return 2
    return 0

