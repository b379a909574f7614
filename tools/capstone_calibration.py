"""The capstones' bars, measured: what each catalogued recipe's model learns, over grading secrets.

A capstone's recipe exercise passes when the model it returns reaches the assignment's ``BAR``: a held-out
loss of at most ``grader.assignments.capstone_gpt.BAR`` nats per token (``train_gpt``), a held-out accuracy
of at least ``grader.assignments.capstone_vit.BAR`` (``train_vit``). This tool trains the solution's recipe
and every recipe entry of the capstone's catalogue (tests/grading/catalogues/) as grading does, once per seed
(a grading secret draws the learner's seed, which relabels the data and seeds the recipe), and prints each
one's held-out figure, worst and best, against the bar: the right recipes' worst must stay on the passing
side and the wrong ones' best on the failing side, each with a margin.

    python -m tools.capstone_calibration --seeds 5
    python -m tools.capstone_calibration --capstone vit --seeds 5
    ATEN_CPU_CAPABILITY=avx2 python -m tools.capstone_calibration --seeds 3 --only right
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

import torch

from course_lib import lm_recipe, vit_recipe
from grader.assignments import capstone_gpt, capstone_vit
from grader.failures import ExerciseFailure
from grader.notebook import read_cells

ROOT = Path(__file__).resolve().parents[1]


class Capstone:
    """One capstone: its notebook, catalogue, recipe exercise, and how its judge scores a trained model."""

    def __init__(self, slug: str, recipe: str, judge, higher_is_better: bool, unit: str):
        self.slug, self.recipe, self.judge, self.higher, self.unit = slug, recipe, judge, higher_is_better, unit
        self.notebook = next((ROOT / "solutions" / slug).glob("*.ipynb"))
        self.catalogue = ROOT / "tests" / "grading" / "catalogues" / f"{slug}.py"

    def passes(self, value: float) -> bool:
        return value >= self.judge.BAR if self.higher else value <= self.judge.BAR

    def margin(self, value: float) -> float:
        """How far ``value`` lies on its side of the bar (positive: the side it should be on)."""
        return value - self.judge.BAR if self.higher else self.judge.BAR - value

    def measure(self, recipe, seed: int) -> float:
        """The judged figure of the model ``recipe`` returns under ``seed`` (ExerciseFailure: no model)."""
        C = self.judge
        if self.recipe == "train_gpt":
            train, held, vocab = C.relabelled(seed)
            cfg, params = C.recipe_output(recipe(train, vocab, C.GRADING_STEPS, seed % 1000), vocab, self.recipe)
            return lm_recipe.evaluate(params, held, cfg, C.BLOCK)
        train, train_y, held, held_y = C.relabelled(seed)
        cfg, params = C.recipe_output(recipe(train, train_y, 10, C.GRADING_STEPS, seed % 1000), self.recipe)
        return vit_recipe.evaluate(params, held, held_y, cfg)[1]


CAPSTONES = {"gpt": Capstone("08x-capstone-gpt", "train_gpt", capstone_gpt, False, "nats/token"),
             "vit": Capstone("11x-capstone-vit", "train_vit", capstone_vit, True, "held-out accuracy")}


def namespace(capstone: Capstone, recipe_source: str | None = None) -> dict:
    """The solution notebook's names (its long cells and tests left out), with the recipe replaced."""
    ns: dict = {"__name__": "__main__"}
    for cell in read_cells(capstone.notebook):
        if cell.kind != "code" or cell.is_test or cell.is_check or cell.is_long:
            continue
        source = recipe_source if cell.grade_id == capstone.recipe and recipe_source else cell.source
        exec(compile(source, f"<cell {cell.index}>", "exec"), ns)
    return ns


def held_out(capstone: Capstone, recipe, seed: int) -> tuple[float | None, str]:
    """The recipe's judged figure under ``seed`` (None where it returns no model), and the CPU seconds it took."""
    start = time.process_time()
    try:
        value = capstone.measure(recipe, seed)
    except (ExerciseFailure, RuntimeError) as exc:
        return None, f"{time.process_time() - start:.1f} s, no model: {str(exc)[:60]}"
    return value, f"{time.process_time() - start:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capstone", choices=sorted(CAPSTONES), default="gpt", help="which capstone (gpt)")
    parser.add_argument("--seeds", type=int, default=3, help="how many learner seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--only", choices=("right", "wrong"), help="only the right or only the wrong recipes")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    capstone = CAPSTONES[args.capstone]
    catalogue = runpy.run_path(str(capstone.catalogue))
    recipes = [("right", "the solution", None)]
    recipes += [("right", e["how"], e["source"]) for e in catalogue["RIGHT"] if e["exercise"] == capstone.recipe]
    recipes += [("wrong", e["mistake"], e["source"]) for e in catalogue["WRONG"] if e["exercise"] == capstone.recipe]
    recipes = [r for r in recipes if not args.only or r[0] == args.only]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    side = ">=" if capstone.higher else "<="
    print(f"bar: {capstone.unit} {side} {capstone.judge.BAR} after {capstone.judge.GRADING_STEPS} updates; "
          f"seeds {list(seeds)}")
    right_margin, wrong_margin, worst_right, best_wrong = float("inf"), float("inf"), None, None
    for kind, what, source in recipes:
        recipe = namespace(capstone, source)[capstone.recipe]
        values = []
        for seed in seeds:
            value, note = held_out(capstone, recipe, seed)
            values.append(value)
            print(f"  {kind:5} {what[:60]:60} seed {seed}: {'-' if value is None else f'{value:.3f}':>7} ({note})",
                  flush=True)
        for value in values:
            if kind == "right":
                margin = float("-inf") if value is None else capstone.margin(value)
                if margin < right_margin:
                    right_margin, worst_right = margin, value
            elif value is not None and -capstone.margin(value) < wrong_margin:
                wrong_margin, best_wrong = -capstone.margin(value), value
    show = lambda v: "no model" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"right recipes' worst: {show(worst_right)} (margin {right_margin:.3f}); "
          f"wrong recipes' best with a model: {show(best_wrong)} (margin {wrong_margin:.3f})")
    return 0 if right_margin >= 0 and wrong_margin > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
