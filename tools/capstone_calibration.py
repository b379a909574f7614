"""The GPT capstone's bar, measured: the held-out loss of each catalogued recipe over grading secrets.

The recipe exercise (``train_gpt``) passes when the model it returns reaches a held-out loss of at most
``grader.assignments.capstone_gpt.BAR`` nats per token. This tool trains the solution's recipe and every
``train_gpt`` entry of the catalogue (tests/grading/catalogues/08x-capstone-gpt.py) as grading does, once per
seed (a grading secret draws the learner's seed, which relabels the tokens and seeds the recipe), and prints
each one's held-out loss, worst and best, against the bar: the right recipes' worst must stay under it and
the wrong ones' best over it, each with a margin.

    python -m tools.capstone_calibration --seeds 5
    ATEN_CPU_CAPABILITY=avx2 python -m tools.capstone_calibration --seeds 3 --only right
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

import torch

from course_lib import lm_recipe as R
from grader.assignments import capstone_gpt as C
from grader.failures import ExerciseFailure
from grader.notebook import read_cells

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "08x-capstone-gpt" / "capstone_gpt.ipynb"
CATALOGUE = ROOT / "tests" / "grading" / "catalogues" / "08x-capstone-gpt.py"


def namespace(train_gpt_source: str | None = None) -> dict:
    """The solution notebook's names (its long cells and tests left out), with ``train_gpt`` replaced."""
    ns: dict = {"__name__": "__main__"}
    for cell in read_cells(NOTEBOOK):
        if cell.kind != "code" or cell.is_test or cell.is_check or cell.is_long:
            continue
        source = train_gpt_source if cell.grade_id == "train_gpt" and train_gpt_source else cell.source
        exec(compile(source, f"<cell {cell.index}>", "exec"), ns)
    return ns


def held_out(train_gpt, seed: int) -> tuple[float | None, str]:
    """The recipe's held-out loss under ``seed`` (None where it returns no model), and the CPU seconds it took."""
    train, held, vocab = C.relabelled(seed)
    start = time.process_time()
    try:
        cfg, params = C.recipe_output(train_gpt(train, vocab, C.GRADING_STEPS, seed % 1000), vocab, "train_gpt")
    except (ExerciseFailure, RuntimeError) as exc:
        return None, f"{time.process_time() - start:.1f} s, no model: {str(exc)[:60]}"
    cpu = time.process_time() - start
    return R.evaluate(params, held, cfg, C.BLOCK), f"{cpu:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="how many learner seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--only", choices=("right", "wrong"), help="only the right or only the wrong recipes")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    catalogue = runpy.run_path(str(CATALOGUE))
    recipes = [("right", "the solution", None)]
    recipes += [("right", e["how"], e["source"]) for e in catalogue["RIGHT"] if e["exercise"] == "train_gpt"]
    recipes += [("wrong", e["mistake"], e["source"]) for e in catalogue["WRONG"] if e["exercise"] == "train_gpt"]
    recipes = [r for r in recipes if not args.only or r[0] == args.only]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"bar: held-out loss <= {C.BAR} nats/token after {C.GRADING_STEPS} updates; seeds {list(seeds)}")
    worst_right, best_wrong = float("-inf"), float("inf")
    for kind, what, source in recipes:
        train_gpt = namespace(source)["train_gpt"]
        losses = []
        for seed in seeds:
            loss, note = held_out(train_gpt, seed)
            losses.append(loss)
            print(f"  {kind:5} {what[:60]:60} seed {seed}: {'-' if loss is None else f'{loss:.3f}':>7} ({note})",
                  flush=True)
        measured = [v for v in losses if v is not None]
        if kind == "right":
            worst_right = max([worst_right, *[float("inf") if v is None else v for v in losses]])
        elif measured:
            best_wrong = min([best_wrong, *measured])
    print(f"right recipes' worst: {worst_right:.3f} (margin {C.BAR - worst_right:.3f}); "
          f"wrong recipes' best with a model: {best_wrong:.3f} (margin {best_wrong - C.BAR:.3f})")
    return 0 if worst_right <= C.BAR < best_wrong else 1


if __name__ == "__main__":
    sys.exit(main())
