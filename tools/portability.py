"""The chapter notebooks give the same outputs on any machine, and their claims hold over seeds.

Two runs, each a make target:

    python -m tools.portability matrix   # make portability: nbval strict under every CPU-kernel variant
    python -m tools.portability seeds    # make seeds: every claim over 5 freshly drawn seeds, its worst margin

**matrix.** torch picks its CPU kernels by the processor (``ATEN_CPU_CAPABILITY``:
``default``, ``avx2``, ``avx512``) and splits work by its thread count; a GPU
rounds differently again. A stored output is portable when a fresh run under
each variant prints it again. The matrix runs nbval, strict, on every chapter
notebook under: the kernels ``default`` and ``avx2`` and the machine's best
(1 thread each), the machine's best with 2 threads, and CUDA when a GPU is
present. The stored outputs are written on ``default``, torch's portable
kernels (:func:`tools.notebooks.writing_kernels`), and ``make test`` runs
every chapter notebook once on the machine's own kernels with 1 thread
(:func:`suite_kernels`, started by ``chapters/conftest.py``): on any x86-64
machine that run compares two sets of kernels.

**seeds.** Every notebook takes its seed from ``COURSE_SEED``
(``course_lib.experiment``). Each notebook runs once per seed; every claim it
checks is logged, and the table gives, per claim, the seeds it held on, its
smallest margin and the lowest and highest value it measured. A claim that
fails on any seed, or a notebook that stops with an error, fails the run. By
default the seeds are five drawn afresh on every run (``--seeds fresh:5``,
printed first and written to the output): a fixed list of seeds would become a
training set for the thresholds. A threshold is set from the spread a claim
shows over many seeds, with a margin; a claim that changes sign with the seed
is not a finding. The notebooks run on the machine's own CPU kernels;
``--kernels default`` runs them on the portable ones the stored outputs are
written on (a long training run rounds differently on each, and its claims must
hold on both).

    python -m tools.portability seeds --jobs 2 chapters/09-vision-transformer/inside-a-vit.ipynb
    python -m tools.portability seeds --seeds 0-4,7,11,fresh:10 --jobs 1 --out /tmp/seeds.json NOTEBOOK
    python -m tools.portability matrix --variants default:1,native:2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tools.course_book import ROOT
from tools.notebooks import TIMEOUT, chapter_notebooks

CAPABILITIES = ("default", "avx2", "avx512")


def suite_kernels() -> tuple[str | None, str]:
    """The CPU kernels of a chapter notebook's run in ``make test``, as ``(named, capability)``.

    The machine's own (``named`` is None: the kernel starts without ``ATEN_CPU_CAPABILITY``, and torch
    picks ``capability``, :func:`native_capability`), unless the environment names a set (``make
    portability``'s variants do; ``named`` is that set). The stored outputs were written on
    :data:`tools.notebooks.WRITING_CAPABILITY`, so on a machine whose own kernels differ, the run that
    proves a notebook prints its stored outputs also proves they are not one set of kernels' rounding.
    """
    named = os.environ.get("ATEN_CPU_CAPABILITY") or None
    return named, named or native_capability()


def started_with(pid: int) -> str | None:
    """The ``ATEN_CPU_CAPABILITY`` a running process was started with (Linux's /proc), None when unset."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = [item.split(b"=", 1)[1].decode() for item in environ if item.startswith(b"ATEN_CPU_CAPABILITY=")]
    return found[0] if found else None


def native_capability() -> str:
    """torch's own choice of CPU kernels on this machine, as ``ATEN_CPU_CAPABILITY`` spells it."""
    import torch

    return torch.backends.cpu.get_cpu_capability().lower()


def default_variants() -> list[tuple[str, int]]:
    """(capability, threads) pairs: every capability the machine has with 1 thread, its best with 2."""
    native = native_capability()
    caps = [c for c in CAPABILITIES if CAPABILITIES.index(c) <= CAPABILITIES.index(native)] \
        if native in CAPABILITIES else ["default", native]
    return [(c, 1) for c in caps] + [(native, 2)]


def parse_variants(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        cap, _, threads = item.strip().partition(":")
        cap = native_capability() if cap == "native" else cap
        if cap not in CAPABILITIES:
            raise SystemExit(f"--variants: {cap!r} is not a CPU capability; use one of {', '.join(CAPABILITIES)} "
                             "or native, as CAP:THREADS (default:1,native:2)")
        try:
            n = int(threads or 1)
        except ValueError:
            raise SystemExit(f"--variants: {threads!r} in {item!r} is not a thread count") from None
        if n < 1:
            raise SystemExit(f"--variants: the thread count in {item!r} must be >= 1")
        out.append((cap, n))
    return out


#: how many seeds ``make seeds`` draws when none are named, and the range it draws them from
FRESH_SEEDS = 5
SEED_RANGE = 2**31
SEEDS_RULE = ("give fresh:N (N seeds drawn afresh), a range like 0-4, a list like 0,3,7, "
              "or a list of those like 0-4,7,fresh:3")


def parse_seeds(text: str, draw=None) -> list[int]:
    """The seeds ``--seeds`` names: ``fresh:N`` draws N new ones, ``A-B`` a range, ``A,B,C`` a list; mixed by commas.

    A fixed list of seeds is a training set for thresholds: a claim tuned until it holds on seeds 0-4 may fail
    on seed 7. ``fresh:N`` draws N seeds from ``0 .. 2**31 - 1`` with :mod:`secrets` (``draw(n)``, replaceable
    in tests), different on every run, so each ``make seeds`` tries the claims on seeds nobody tuned them on.
    The seeds come back in the order given, without repeats.
    """
    if draw is None:
        import secrets

        def draw(n):
            return [secrets.randbelow(SEED_RANGE) for _ in range(n)]

    seeds: list[int] = []
    items = text.strip().split(",") if text.strip() else [""]
    for item in (i.strip() for i in items):
        fresh = re.fullmatch(r"fresh:(\d+)", item)
        span = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if fresh and int(fresh.group(1)) >= 1:
            found = draw(int(fresh.group(1)))
        elif span and int(span.group(1)) <= int(span.group(2) or span.group(1)):
            found = list(range(int(span.group(1)), int(span.group(2) or span.group(1)) + 1))
        else:
            raise SystemExit(f"--seeds {text!r}: {item!r} is not a seed, a range or fresh:N; {SEEDS_RULE}")
        if any(s >= SEED_RANGE for s in found):
            raise SystemExit(f"--seeds {text!r}: seeds must be below 2**31 ({SEED_RANGE}); {SEEDS_RULE}")
        seeds += [s for s in found if s not in seeds]
    return seeds


def variant_env(capability: str | None, threads: int, log: Path | None = None, seed: int | None = None) -> dict:
    env = dict(os.environ, COURSE_STATIC_OUTPUT="1", COURSE_THREADS=str(threads))
    env.pop("COURSE_SEED", None)
    if capability is not None:  # a CPU variant runs on the CPU even where a GPU is present
        env["ATEN_CPU_CAPABILITY"] = capability
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:  # the GPU variant: the machine's own CPU kernels for what runs on the CPU
        env["ATEN_CPU_CAPABILITY"] = native_capability()
    if log is not None:
        env["COURSE_CLAIMS_LOG"] = str(log)
    if seed is not None:
        env["COURSE_SEED"] = str(seed)
    return env


def run_nbval(paths: list[Path], env: dict) -> tuple[int, str]:
    """nbval strict over ``paths`` in one pytest process: (return code, its report)."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-o", "testpaths=",
            "--nbval", "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
            "--nbval-cell-timeout=600", *[str(p) for p in paths]]
    res = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


def failed_cells(report: str) -> list[str]:
    return sorted(set(re.findall(r"^FAILED (\S+\.ipynb::Cell \d+)", report, re.M)))


def matrix(paths: list[Path], variants: list[tuple[str, int]], cuda: bool) -> int:
    runs = [(f"{cap}, {n} thread{'s' if n > 1 else ''}", cap, n) for cap, n in variants]
    if cuda:
        runs.append(("cuda", None, 1))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, cap, n) in enumerate(runs):
            log = Path(tmp) / f"claims-{i}.jsonl"
            log.touch()
            start = time.perf_counter()
            code, report = run_nbval(paths, variant_env(cap, n, log))
            cells = failed_cells(report)
            summary = (re.findall(r"^=+ (.*) in [\d.]+s", report, re.M) or report.strip().splitlines()[-1:])[-1]
            claims = summarise([json.loads(line) for line in log.read_text().splitlines() if line.strip()])
            ranked = [c for c in claims if c["relative"] is not None]
            smallest = (f"; smallest claim margin {ranked[0]['relative']:+.3f} ({ranked[0]['statement']})"
                        if ranked else "")
            print(f"{name:>22}: {'ok' if code == 0 else 'FAILED'} ({summary}; {len(claims)} claims{smallest}; "
                  f"{time.perf_counter() - start:.0f} s)", flush=True)
            for cell in cells:
                print(f"{'':>24}{cell}")
            if code != 0:
                bad += 1
                if not cells:
                    print(report[-3000:])
    print(f"portability: {len(runs) - bad} of {len(runs)} variants pass on {len(paths)} notebooks")
    return 1 if bad else 0


def _execute(job: tuple[str, int, str, str | None]) -> tuple[str, int, str | None, float]:
    """Run one notebook top to bottom under one seed (no outputs saved): (path, seed, error, seconds).

    ``job`` is (path, seed, claims log, CPU kernels): the kernels are the machine's own when None.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path, seed, log, capability = job
    os.environ.update(variant_env(None, int(os.environ.get("COURSE_THREADS", "1")), Path(log), seed))
    os.environ.pop("ATEN_CPU_CAPABILITY", None)  # the machine's own kernels, unless named
    if capability is not None:
        os.environ["ATEN_CPU_CAPABILITY"] = capability
    os.environ["COURSE_NOTEBOOK"] = str(Path(path).relative_to(ROOT))
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    try:
        NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", shutdown_kernel="immediate",
                       resources={"metadata": {"path": str(Path(path).parent)}}).execute()
        error = None
    except CellExecutionError as e:
        error = str(e).strip().splitlines()[-1][:300]
    return path, seed, error, time.perf_counter() - start


def summarise(records: list[dict]) -> list[dict]:
    """Per claim (notebook, statement): the seeds it held and failed on, its smallest margins, its spread.

    ``values`` holds ``[seed, value]`` for every seed, and ``lowest``/``highest`` the extremes of the numeric
    ones (None when no value is a number): a threshold is set from that spread, not from one seed's margin.
    """
    by_claim: dict[tuple[str, str], dict] = {}
    for r in records:
        key = (r["notebook"], r["statement"])
        s = by_claim.setdefault(key, {"notebook": r["notebook"], "statement": r["statement"], "op": r["op"],
                                      "held": [], "failed": [], "margin": None, "relative": None, "worst_value": None,
                                      "values": [], "lowest": None, "highest": None})
        (s["held"] if r["holds"] else s["failed"]).append(r["seed"])
        s["values"].append([r["seed"], r["value"]])
        if isinstance(r["value"], (int, float)) and not isinstance(r["value"], bool):
            s["lowest"] = r["value"] if s["lowest"] is None else min(s["lowest"], r["value"])
            s["highest"] = r["value"] if s["highest"] is None else max(s["highest"], r["value"])
        if r["op"] != "==" and r["relative"] is not None and (s["relative"] is None or r["relative"] < s["relative"]):
            s["relative"], s["margin"], s["worst_value"] = r["relative"], r["margin"], r["value"]
    return sorted(by_claim.values(), key=lambda s: (s["relative"] is None, s["relative"] or 0.0))


def seeds_run(paths: list[Path], seeds: list[int], jobs: int, out: Path | None, asked: str | None = None,
              capability: str | None = None) -> int:
    """Every notebook under every seed (on ``capability``'s CPU kernels, the machine's own when None)."""
    print(f"seeds: {', '.join(map(str, seeds))}" + (f"  (--seeds {asked})" if asked else "")
          + "; COURSE_SEED=N reruns one" + (f"; CPU kernels {capability}" if capability else ""), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "claims.jsonl"
        log.touch()
        todo = [(str(p), s, str(log), capability) for p in paths for s in seeds]
        errors = []
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for path, seed, error, secs in pool.map(_execute, todo):
                rel = Path(path).relative_to(ROOT)
                print(f"seed {seed}  {rel}  {secs:5.1f} s  {'ok' if error is None else 'ERROR: ' + error}", flush=True)
                if error is not None:
                    errors.append((str(rel), seed, error))
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    table = summarise(records)
    print(f"\n{len(table)} claims in {len(paths)} notebooks over seeds {seeds}: smallest margin first")
    print(f"{'relative':>9} {'margin':>10} {'lowest':>10} {'highest':>10} {'held':>5}  claim")
    for s in table:
        rel = "exact" if s["relative"] is None else f"{s['relative']:+.3f}"
        margin = "" if s["margin"] is None else f"{s['margin']:+.4g}"
        low, high = ("" if v is None else f"{v:.4g}" for v in (s["lowest"], s["highest"]))
        held = f"{len(s['held'])}/{len(s['held']) + len(s['failed'])}"
        print(f"{rel:>9} {margin:>10} {low:>10} {high:>10} {held:>5}  {s['notebook']}: {s['statement']}"
              + (f"  FAILED on seeds {sorted(s['failed'])}" if s["failed"] else ""))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        written = {"seeds": seeds, "asked": asked, "kernels": capability or native_capability(), "claims": table,
                   "errors": errors}
        out.write_text(json.dumps(written, indent=1))
        print(f"written to {out}")
    failed = [s for s in table if s["failed"]]
    for path, seed, error in errors:
        print(f"ERROR {path} on seed {seed}: {error}")
    print(f"seeds: {len(table) - len(failed)} of {len(table)} claims hold on every seed; "
          f"{len(errors)} notebook run(s) stopped with an error")
    return 1 if failed or errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.portability", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("matrix", help="nbval strict under each CPU-kernel and thread variant (and CUDA)")
    m.add_argument("--variants", help="CAP:THREADS,... (default: every capability with 1 thread, native with 2)")
    m.add_argument("paths", nargs="*", type=Path)
    s = sub.add_parser("seeds", help="run the notebooks over seeds; every claim's smallest margin")
    s.add_argument("--seeds", default=f"fresh:{FRESH_SEEDS}",
                   help=f"fresh:N, A-B, A,B,C or a mix (default fresh:{FRESH_SEEDS}: drawn afresh on every run)")
    s.add_argument("--jobs", type=int, default=2)
    s.add_argument("--kernels", choices=CAPABILITIES, help="torch's CPU kernels (default: the machine's own)")
    s.add_argument("--out", type=Path, default=ROOT / "_build" / "claims" / "seeds.json")
    s.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)

    paths = [p.resolve() for p in args.paths] or chapter_notebooks()
    for p in paths:
        if p.suffix != ".ipynb" or not p.is_file():
            parser.error(f"{p}: not a notebook")
    if args.command == "matrix":
        import torch

        variants = parse_variants(args.variants) if args.variants else default_variants()
        return matrix(paths, variants, cuda=torch.cuda.is_available())
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: must be >= 1")
    return seeds_run(paths, parse_seeds(args.seeds), args.jobs, args.out, args.seeds, args.kernels)


if __name__ == "__main__":
    sys.exit(main())
