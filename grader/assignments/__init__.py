"""One module per assignment, named after its slug (``02-attention``: :mod:`grader.assignments.attention`):
its cases, its likely mistakes and its registry entry, ``ASSIGNMENT`` (see :mod:`grader.registry`)."""
