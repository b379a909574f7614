"""The scores of a mutation run: per exercise, per assignment, as JSON and as the table the tool prints."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .equivalents import Equivalent

#: the kill rate every assignment must reach
TARGET = 0.95


@dataclass
class ExerciseResult:
    assignment: str
    exercise: str
    baseline: str = "passed"
    mutants: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(m["status"] == status for m in self.mutants)

    @property
    def total(self) -> int:
        return len(self.mutants)

    @property
    def killed(self) -> int:
        return self.count("killed") + self.count("timeout")

    @property
    def equivalent(self) -> int:
        return self.count("equivalent")

    @property
    def survived(self) -> int:
        return self.count("survived")

    @property
    def kill_rate(self) -> float:
        scored = self.total - self.equivalent
        return self.killed / scored if scored else 1.0

    def summary(self) -> dict:
        return {"exercise": self.exercise, "baseline": self.baseline, "mutants": self.total, "killed": self.killed,
                "timeouts": self.count("timeout"), "equivalent": self.equivalent, "survived": self.survived,
                "kill_rate": round(self.kill_rate, 4), "seconds": round(self.seconds, 1),
                "survivors": [m for m in self.mutants if m["status"] == "survived"],
                "equivalents": [m for m in self.mutants if m["status"] == "equivalent"],
                "all": self.mutants}


def build_report(slugs: list[str], results: list[ExerciseResult], equivalents: list[Equivalent], *,
                 exercises: list[str] | None, max_per_exercise: int | None, timeout: float, seconds: float) -> dict:
    """The report (a dict, as written to JSON): per assignment its kill rate and its exercises' scores, and the
    entries of the equivalent list that no mutant matched (on a full run)."""
    report: dict = {"target": TARGET, "timeout_s": timeout, "seconds": round(seconds, 1), "assignments": {}}
    for a in slugs:
        exs = [r for r in results if r.assignment == a]
        if not exs:
            continue
        killed = sum(r.killed for r in exs)
        scored = sum(r.total - r.equivalent for r in exs)
        rate = killed / scored if scored else 1.0
        broken = [r.exercise for r in exs if r.baseline != "passed"]
        report["assignments"][a] = {
            "mutants": sum(r.total for r in exs), "killed": killed, "equivalent": sum(r.equivalent for r in exs),
            "survived": sum(r.survived for r in exs), "kill_rate": round(rate, 4),
            "ok": rate >= TARGET and not broken, "reference_fails": broken,
            "exercises": {r.exercise: r.summary() for r in exs},
        }
    stale = [dataclasses.asdict(e) for e in equivalents if not e.used and e.assignment in slugs
             and (not exercises or e.exercise in exercises) and max_per_exercise is None]
    report["stale_equivalents"] = stale
    report["ok"] = all(v["ok"] for v in report["assignments"].values())
    return report


def format_report(report: dict) -> str:
    out = []
    for a, ar in report["assignments"].items():
        out.append(f"\n{a}: kill rate {ar['kill_rate']:.1%} ({ar['killed']} killed of "
                   f"{ar['mutants'] - ar['equivalent']}; {ar['equivalent']} equivalent)"
                   + ("" if ar["ok"] else "  BELOW TARGET" if not ar["reference_fails"] else "  REFERENCE FAILS"))
        out.append(f"  {'exercise':32} {'mutants':>7} {'killed':>7} {'equiv':>6} {'surv':>5} {'rate':>7}")
        for name, e in ar["exercises"].items():
            out.append(f"  {name:32} {e['mutants']:7d} {e['killed']:7d} {e['equivalent']:6d} {e['survived']:5d} "
                       f"{e['kill_rate']:7.1%}" + ("" if e["baseline"] == "passed" else f"  {e['baseline']}"))
        for name, e in ar["exercises"].items():
            for m in e["survivors"]:
                out.append(f"  survivor {name} [{m['kind']}] line {m['line']}:")
                out.extend("      " + row for row in m["diff"].splitlines())
    for e in report.get("stale_equivalents", []):
        out.append(f"\nnote: equivalent entry no longer generated: {e['assignment']} {e['exercise']}: "
                   f"{e['before']!r} -> {e['after']!r}")
    out.append(f"\n{'all assignments reach' if report['ok'] else 'NOT every assignment reaches'} the target of "
               f"{report['target']:.0%} ({report['seconds']:.0f} s)")
    return "\n".join(out)
