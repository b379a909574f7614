from tests.grading.similarity import class_a_attention as att
from tests.grading.similarity import class_a_vit as vit
from tests.grading.similarity.planted import Copy, Submission

LEARNERS = {}
COPIES = []
for slug, module in (("02-attention", att), ("09-vision-transformer", vit)):
    LEARNERS[slug] = {k: Submission(v, module.ADDED.get(k, [])) for k, v in module.INDEPENDENT.items()}
    for c in module.COPIES:
        LEARNERS[slug][c["learner"]] = Submission(c["cells"], c.get("added", []))
        COPIES.append(Copy(slug, c["learner"], c["source"], c["disguise"]))

#: learners who worked alone and whose code is the reference's (none in class A)
SOLUTION_LIKE: set[str] = set()
