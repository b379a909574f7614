"""A learner's log-ins (ssh, su, the console, cron) in the same limits as their server, while the hub runs.

The hub's limits (:mod:`classroom.hub.cgroups`) hold for what the hub starts; a learner who logs in another way would
run outside them, and write their scratch files to the machine's disk (/tmp, /var/tmp, /run/lock). ``make hub``
adds three lines to PAM's common session stacks (``/etc/pam.d/common-session`` and ``-noninteractive``, which sshd,
su, login and cron include), for the course's learners alone::

    session [success=2 default=ignore] pam_succeed_if.so quiet user notingroup <learners>
    session required pam_namespace.so
    session required pam_exec.so quiet <prefix>/run/session-hook

* ``pam_namespace`` gives the session its own /tmp, /var/tmp, /dev/shm and /run/lock, memory of the learner's own
  (``/etc/security/namespace.d/<hub>.conf``: the tmpfs method, the learner's memory limit), as their server has;
* the hook (written here) moves the process that opens the session, and so all it starts, into the learner's control
  group (``learners/<name>/logins``, below their server's): their memory, CPU and process limits, shared with
  their server. A learner whose group is not there is refused the session (``make hub`` makes every learner's;
  one added while the hub runs has theirs when their server first starts, and their own /tmp from the hub's next
  start).

``make hub-stop`` takes the lines out (the learners' log-ins then run as on any machine), and the hub's stop ends
the log-ins that run in its groups. Anyone outside the learners' group never reaches the hook.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from classroom.hub.cgroups import HubGroups
from classroom.hub.layout import Groups, Layout

PAM_STACKS = (Path("/etc/pam.d/common-session"), Path("/etc/pam.d/common-session-noninteractive"))
NAMESPACES = Path("/etc/security/namespace.d")
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def _marks(layout: Layout) -> tuple[str, str]:
    name = HubGroups(layout.prefix).name
    return f"# {name} begin: make hub's log-in limits (make hub-stop removes them)", f"# {name} end"


def hook(layout: Layout) -> Path:
    return layout.run / "session-hook"


def namespace_conf(layout: Layout) -> Path:
    return NAMESPACES / f"{HubGroups(layout.prefix).name}.conf"


def write_hook(layout: Layout, groups: HubGroups) -> Path:
    """The session hook: moves the process opening a learner's session (the hook's parent) into the learner's
    group, in every hierarchy; fails (and PAM refuses the session) where the group is missing."""
    roots = sorted({str(Path(p).parent.parent) for p in groups.procs_files("learners", "_")})
    script = "\n".join([
        "#!/bin/sh",
        "# make hub's session hook (classroom/hub/logins.py): a learner's log-in in their control group",
        '[ "$PAM_TYPE" = open_session ] || exit 0',
        'case "$PAM_USER" in ""|*[!a-z0-9_-]*) exit 1 ;; esac',
        f"for root in {' '.join(shlex.quote(r) for r in roots)}; do",
        '    group="$root/$PAM_USER/logins"',
        '    [ -d "$group" ] || { echo "the course hub: no limits for $PAM_USER (is the hub running?)" >&2; exit 1; }',
        '    echo "$PPID" > "$group/cgroup.procs" || exit 1',
        "done",
        "exit 0",
        "",
    ])
    path = hook(layout)
    tmp = path.with_suffix(".new")
    tmp.write_text(script)
    tmp.chmod(0o755)
    tmp.rename(path)
    return path


def install(layout: Layout, groups: Groups, memory: int, learners: list[str]) -> list[str]:
    """The PAM lines, the namespace settings for ``learners`` and the hook; what was done."""
    hub_groups = HubGroups(layout.prefix)
    path = write_hook(layout, hub_groups)
    said = []
    if NAMESPACES.is_dir():
        conf = namespace_conf(layout)
        users = ",".join(learners) or "nobody-of-the-course"
        options = f"tmpfs:mntopts=size={memory},mode=1777,nosuid,nodev"
        conf.write_text(f"# {hub_groups.name}: each learner's log-in has scratch places of its own (make hub)\n" +
                        "".join(f"{place} {place} {options} ~{users}\n" for place in SCRATCH if os.path.isdir(place)))
        said.append(f"each learner's log-in: its own /tmp, /var/tmp, /dev/shm and /run/lock ({conf})")
    begin, end = _marks(layout)
    block = [begin,
             f"session [success=2 default=ignore] pam_succeed_if.so quiet user notingroup {groups.learners}",
             "session required pam_namespace.so",
             f"session required pam_exec.so quiet {path}",
             end]
    for stack in PAM_STACKS:
        if not stack.is_file():
            continue
        lines = _without(stack.read_text().splitlines(), begin, end)
        tmp = stack.with_name(stack.name + ".course-new")
        tmp.write_text("\n".join(lines + block) + "\n")
        os.chmod(tmp, stack.stat().st_mode & 0o777)
        tmp.rename(stack)
        said.append(f"a learner's log-in joins their limits ({stack})")
    return said


def remove(layout: Layout) -> list[str]:
    """Take the hub's lines out of PAM, and its namespace settings; what was removed."""
    begin, end = _marks(layout)
    said = []
    for stack in PAM_STACKS:
        if not stack.is_file():
            continue
        lines = stack.read_text().splitlines()
        kept = _without(lines, begin, end)
        if kept != lines:
            tmp = stack.with_name(stack.name + ".course-new")
            tmp.write_text("\n".join(kept) + "\n")
            os.chmod(tmp, stack.stat().st_mode & 0o777)
            tmp.rename(stack)
            said.append(f"log-in limits removed from {stack}")
    conf = namespace_conf(layout)
    if conf.exists():
        conf.unlink()
    hook(layout).unlink(missing_ok=True)
    return said


def _without(lines: list[str], begin: str, end: str) -> list[str]:
    out, inside = [], False
    for line in lines:
        if line == begin:
            inside = True
        elif line == end and inside:
            inside = False
        elif not inside:
            out.append(line)
    return out
