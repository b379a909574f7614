"""Due dates, extensions and the late policy: what ``deadlines.toml`` says and how nbgrader applies it.

The instructor writes one file in the course folder (``deadlines.toml``, or the file ``DEADLINES`` names;
``deadlines.example.toml`` shows every field)::

    timezone = "Europe/Berlin"        # the zone of the dates written without an offset (default: UTC)

    [late]
    penalty = "per-hour"              # "none": late work is flagged only; "zero": it scores nothing;
    points_per_hour = 1               # "per-hour": this many points off for every hour begun after the due date

    [due]
    02-attention = 2026-12-04T23:59:00

    [extensions.02-attention]
    alice = 2026-12-06T23:59:00       # alice's own due date for 02-attention

``make grade`` writes each due date into the gradebook (:func:`classroom.gradebook.sync_gradebook`) and each
extension as nbgrader's (the learner's due date minus the assignment's, :func:`grant_extensions`); nbgrader's
autograde compares the submission's time (``timestamp.txt``, written by nbgrader's collect and by a zip's
import) with them, and :class:`CourseLatePolicy`, nbgrader's late-submission plugin, turns the time late into
the penalty. A file that breaks a rule is refused as a
whole, with the value and the rule named: a half-read policy would grade some learners by another rule than
the rest. After grading, :func:`apply_late_policy` applies a due date, an extension or a policy changed since
each submission was graded, without grading it again, so the gradebook always follows the file.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Enum, Float

from classroom.gradebook import gradebook_url
from classroom.intake import submitted_at

#: the late policies: flag only, score zero, or points off per hour begun
PENALTIES = ("none", "zero", "per-hour")
#: an assignment id or a learner id as the gradebook spells it
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")


class DeadlineError(ValueError):
    """deadlines.toml breaks a rule; the message names the value and the rule."""


@dataclass(frozen=True)
class Deadlines:
    """The course's due dates (UTC), extensions (a learner's own due date, UTC) and late policy."""

    due: dict[str, dt.datetime] = field(default_factory=dict)
    extensions: dict[str, dict[str, dt.datetime]] = field(default_factory=dict)
    penalty: str = "none"
    points_per_hour: float = 0.0
    #: the zone of the times written without one (the dates here, a zip export's file times)
    timezone: str = "UTC"

    def extension(self, assignment: str, student: str) -> dt.timedelta | None:
        """How much later than the assignment's due date this learner may submit (None: no extension)."""
        own = self.extensions.get(assignment, {}).get(student)
        return None if own is None else own - self.due[assignment]

    def penalty_for(self, score: float, seconds_late: float) -> float:
        """The points taken off a score submitted ``seconds_late`` after the due date (never more than the score)."""
        if seconds_late <= 0 or self.penalty == "none":
            return 0.0
        if self.penalty == "zero":
            return score
        return min(score, self.points_per_hour * math.ceil(seconds_late / 3600))


def read_deadlines(path: Path, assignments: list[str] | None = None) -> Deadlines:
    """The policy in ``path`` (no file: no due dates, nothing is late); :class:`DeadlineError` on a broken rule.

    ``assignments``: the course's assignment ids; a due date for any other id is refused (a misspelt id
    would silently leave its assignment without a due date).
    """
    if not path.exists():
        return Deadlines()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DeadlineError(f"{path}: not a TOML file ({exc})") from None
    unknown = sorted(set(data) - {"timezone", "late", "due", "extensions"})
    if unknown:
        raise DeadlineError(f"{path}: unknown section(s) {unknown}; the file has timezone, [late], [due] and "
                            "[extensions.<assignment>]")
    zone_name = data.get("timezone", "UTC")
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise DeadlineError(f"{path}: timezone = {zone_name!r} is not a time zone name such as 'UTC' or "
                            "'Europe/Berlin'") from None

    def when(value, where: str) -> dt.datetime:
        if isinstance(value, dt.datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=zone)
            return moment.astimezone(dt.timezone.utc).replace(tzinfo=None)  # nbgrader stores naive UTC
        raise DeadlineError(f"{path}: {where} = {value!r} is not a date and time (write e.g. 2026-12-04T23:59:00, "
                            "or with an offset, 2026-12-04T23:59:00+01:00)")

    late = data.get("late", {})
    if not isinstance(late, dict):
        raise DeadlineError(f"{path}: late = {late!r} must be a table: [late] with penalty = ...")
    extra = sorted(set(late) - {"penalty", "points_per_hour"})
    if extra:
        raise DeadlineError(f"{path}: unknown key(s) {extra} in [late]; it has penalty and points_per_hour")
    penalty = late.get("penalty", "none")
    if penalty not in PENALTIES:
        raise DeadlineError(f"{path}: [late] penalty = {penalty!r} is not one of {list(PENALTIES)}")
    points = late.get("points_per_hour", 0)
    if penalty == "per-hour":
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not points > 0:
            raise DeadlineError(f"{path}: [late] points_per_hour = {points!r} must be a positive number with "
                                "penalty = 'per-hour'")
    elif "points_per_hour" in late:
        raise DeadlineError(f"{path}: [late] points_per_hour = {points!r} applies only with penalty = 'per-hour' "
                            f"(penalty is {penalty!r})")

    due_table = data.get("due", {})
    if not isinstance(due_table, dict):
        raise DeadlineError(f"{path}: due = {due_table!r} must be a table: [due] with <assignment> = <date>")
    due = {}
    for assignment, value in due_table.items():
        if assignments is not None and assignment not in assignments:
            raise DeadlineError(f"{path}: [due] {assignment} is not an assignment of the course {assignments}")
        due[assignment] = when(value, f"[due] {assignment}")

    extensions: dict[str, dict[str, dt.datetime]] = {}
    ext_table = data.get("extensions", {})
    if not isinstance(ext_table, dict):
        raise DeadlineError(f"{path}: extensions = {ext_table!r} must hold tables: [extensions.<assignment>]")
    for assignment, learners in ext_table.items():
        if assignment not in due:
            raise DeadlineError(f"{path}: [extensions.{assignment}] has no due date to extend: add "
                                f"{assignment} = <date> under [due]")
        if not isinstance(learners, dict):
            raise DeadlineError(f"{path}: [extensions.{assignment}] must be a table of <learner id> = <date>")
        for student, value in learners.items():
            if not NAME.match(student):
                raise DeadlineError(f"{path}: [extensions.{assignment}] {student!r} is not a learner id "
                                    "(letters, digits, '.', '_', '@' and '-', starting with a letter or digit)")
            own = when(value, f"[extensions.{assignment}] {student}")
            if own <= due[assignment]:
                raise DeadlineError(f"{path}: [extensions.{assignment}] {student} = {value} is not after the "
                                    f"assignment's due date: an extension gives more time")
            extensions.setdefault(assignment, {})[student] = own
    return Deadlines(due, extensions, penalty, float(points) if penalty == "per-hour" else 0.0, zone_name)


class CourseLatePolicy(LateSubmissionPlugin):
    """nbgrader's late-submission plugin with the course's third policy, points off per hour begun."""

    penalty = Enum(PENALTIES, default_value="none", help="none, zero or per-hour").tag(config=True)
    points_per_hour = Float(0.0, help="points off for every hour begun after the due date (per-hour)").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        taken = Deadlines(penalty=self.penalty, points_per_hour=self.points_per_hour).penalty_for(
            score, total_seconds_late)
        if taken:
            self.log.warning("%s submitted %.1f hours late: %g point(s) off (%s)", student_id,
                             total_seconds_late / 3600, taken, self.penalty)
        return taken if self.penalty != "none" else None


def grant_extensions(root: Path, assignment: str, students: list[str], deadlines: Deadlines) -> None:
    """Each learner's extension into the gradebook as deadlines.toml gives it (none there: none in the gradebook)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        for student in students:
            extension = deadlines.extension(assignment, student) if assignment in deadlines.due else None
            if extension is None:
                try:
                    if gb.find_submission(assignment, student).extension is not None:
                        gb.grant_extension(assignment, student)  # no time given: the extension is removed
                except MissingEntry:
                    pass
                continue
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student)
            gb.grant_extension(assignment, student, minutes=extension.total_seconds() / 60)


def apply_late_policy(root: Path, assignment: str, students: list[str], deadlines: Deadlines) -> None:
    """Each graded submission's late penalty as deadlines.toml gives it now, without grading it again.

    Autograde assigns the penalty as it grades (nbgrader's AssignLatePenalties with
    :class:`CourseLatePolicy`); this applies a due date, an extension or a policy changed since,
    so the gradebook always follows the file; and the submission's time from its timestamp.txt.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        for student in students:
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            when = submitted_at(root, student, assignment)
            if when is not None:
                sub.timestamp = when
            gb.db.flush()
            late_s = sub.total_seconds_late
            for nb in sub.notebooks:
                nb.late_submission_penalty = deadlines.penalty_for(nb.score, late_s) or None
        gb.db.commit()
