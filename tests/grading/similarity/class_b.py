"""Planted class B: learners written apart from class A, and copies made by a program, not by hand.

The independent learners are class_b_attention.py's and class_b_vit.py's. The copies are drawn here from a
generator seeded once (44): for each assignment, one copy led by each disguise of disguise.py (of a learner
whose code it changes, followed by up to two other disguises drawn at random), a second copy of the first
copy's source, a learner whose own work holds one substantial exercise copied (disguised), and a learner
who pasted the solution notebook (disguised). A
copy's disguise is the list of disguises that changed something. Class B was written, frozen and then
measured once; nothing in classroom/similarity was tuned on it.
"""

from __future__ import annotations

import json
import random
import re

from tests.grading.similarity import class_b_attention as att
from tests.grading.similarity import class_b_vit as vit
from tests.grading.similarity.disguise import DISGUISES, disguise, exercises_only
from tests.grading.similarity.planted import NOTEBOOKS, REFERENCE, ROOT, Copy, Submission

SEED = 44
COPIERS = ["nico", "oona", "pete", "quin", "rhea", "saul", "tess", "uri", "vera", "wade"]
SUBSTANTIAL = {"02-attention": ["masked_softmax"],
               "09-vision-transformer": ["patchify", "vit_forward", "interpolate_pos_embed", "hard_distillation_loss"]}


def solution(slug: str) -> Submission:
    """The solution notebook's solution cells, nbgrader's markers taken out."""
    nb = json.loads((ROOT / "solutions" / slug / NOTEBOOKS[slug]).read_text(encoding="utf-8"))
    cells = {}
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            source = "".join(cell["source"])
            cells[meta["grade_id"]] = re.sub(r"\n *### (BEGIN|END) SOLUTION", "", source)
    return Submission(cells)


def build() -> tuple[dict[str, dict[str, Submission]], list[Copy]]:
    rng = random.Random(SEED)
    learners: dict[str, dict[str, Submission]] = {}
    copies: list[Copy] = []
    names = sorted(DISGUISES)
    for slug, module in (("02-attention", att), ("09-vision-transformer", vit)):
        own = {k: Submission(v, getattr(module, "ADDED", {}).get(k, [])) for k, v in module.INDEPENDENT.items()}
        learners[slug] = dict(own)
        plans = []
        for primary in rng.sample(names, len(names)):
            # each disguise leads one copy, of a learner whose code it changes, with up to two others after it
            sources = [s for s in sorted(own) if DISGUISES[primary](own[s], random.Random(0)) is not None]
            if not sources:
                continue
            source = rng.choice(sources)
            extra = rng.sample([n for n in names if n != primary], rng.choice([0, 1, 2]))
            plans.append((source, [primary] + extra))
        plans.append((plans[0][0], rng.sample(names, 2)))  # a second copy of one source
        for copier, (source, chosen) in zip(COPIERS, plans):
            sub, applied = disguise(own[source], chosen, rng)
            learners[slug][copier] = sub
            copies.append(Copy(slug, copier, source, "+".join(applied) or "none"))
        for copier, own_work in module.COPIERS_OF_ONE.items():
            source = rng.choice(sorted(own))
            exercise = rng.choice(SUBSTANTIAL[slug])
            part, applied = disguise(exercises_only(own[source], {exercise}), rng.sample(names, 2), rng)
            learners[slug][copier] = Submission({**own_work, **part.cells}, part.added)
            copies.append(Copy(slug, copier, source, f"one exercise copied ({exercise}): {'+'.join(applied)}"))
        third = rng.choice([n for n in names if n not in ("rename", "respell")])
        sub, applied = disguise(solution(slug), ["rename", "respell", third], rng)
        learners[slug]["yves"] = sub
        copies.append(Copy(slug, "yves", REFERENCE, f"the solution pasted: {'+'.join(applied)}"))
    return learners, copies


LEARNERS, COPIES = build()

#: Juno, who worked alone, writes the book's version; measured once (the class frozen): in 09 every exercise
#: is the solution notebook's code, token for token, and in 02 three exercises are and masked_softmax differs
#: in its last line (97% alike). No comparison can tell that from the pasted solution, and the report flags
#: Juno against the reference and against Yves, who pasted it. They are class B's only independent flags.
SOLUTION_LIKE = {"juno"}
