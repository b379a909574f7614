"""The program as the comparison sees it: a graph of values, each a node (an operation on other nodes).

An exercise's code becomes the nodes its result and its checks depend on
(:mod:`classroom.similarity.normalise` builds them): local names, statement order,
temporaries and dead statements leave no trace, because a node is named by
what it computes, never by where it is stored. Two nodes that compute the same
thing from the same inputs are one node (their :attr:`Node.h` is equal).

What two programs are compared on is their *features*
(:func:`features`): for every node, the operation together with the
operations below it to a depth of one, two and three (the Weisfeiler-Lehman
subtree labels of a graph kernel). A copied expression keeps all of its
features; a changed leaf changes the features of its few ancestors only.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Iterable, Iterator

#: the depths of the subtree features (a node with its operands to this many levels)
DEPTHS = (1, 2, 3)


def _digest(*parts: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(b"\x00".join(parts), digest_size=8).digest(), "big")


class Node:
    """One value: an operation (``"call:softmax"``, ``"getitem"``, ``"const:-1"``, ``"param:0"``) on operands.

    ``h`` identifies what the node computes (its operation and, recursively, its operands'): the same in
    every process, so an order by ``h`` is canonical.
    """

    __slots__ = ("op", "kids", "h", "lines")

    def __init__(self, op: str, kids: Iterable[Node] = ()):
        self.op = op
        self.kids = tuple(kids)
        self.h = _digest(op.encode("utf-8", "surrogatepass"), *(k.h.to_bytes(8, "big") for k in self.kids))
        self.lines: set = set()  # where the learner wrote it: (cell, line) pairs, for the page only

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and other.h == self.h

    def __hash__(self) -> int:
        return self.h

    def __repr__(self) -> str:
        return show(self)


def sorted_kids(kids: Iterable[Node]) -> list[Node]:
    """Operands of a commutative operation, in their canonical order."""
    return sorted(kids, key=lambda k: k.h)


def show(node: Node, depth: int = 6) -> str:
    """A readable rendering of a node (for debugging and error messages), cut at ``depth``."""
    if not node.kids:
        return node.op
    if depth == 0:
        return f"{node.op}(...)"
    return f"{node.op}({', '.join(show(k, depth - 1) for k in node.kids)})"


def walk(roots: Iterable[Node]) -> Iterator[Node]:
    """Every node the roots depend on, each once."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.h in seen:
            continue
        seen.add(n.h)
        yield n
        stack.extend(n.kids)


def features(roots: Iterable[Node]) -> tuple[Counter, dict[int, frozenset]]:
    """The subtree features of every node the roots depend on (leaves alone are not features), as a multiset,
    and for each feature the learner's lines that wrote it.

    A node that several statements compute counts once: the graph holds it once.
    """
    nodes = list(walk(roots))
    label: dict[int, int] = {n.h: _digest(n.op.encode("utf-8", "surrogatepass")) for n in nodes}
    found: Counter = Counter()
    where: dict[int, set] = {}
    for depth in DEPTHS:
        deeper = {}
        for n in nodes:
            deeper[n.h] = _digest(depth.to_bytes(1, "big"), label[n.h].to_bytes(8, "big"),
                                  *(label[k.h].to_bytes(8, "big") for k in n.kids))
            if n.kids:
                f = deeper[n.h]
                found[f] += 1
                where.setdefault(f, set()).update(n.lines)
        label = deeper
    return found, {f: frozenset(lines) for f, lines in where.items()}


def size(roots: Iterable[Node]) -> int:
    """How many operations (nodes with operands) the roots depend on: the amount of code counted."""
    return sum(1 for n in walk(roots) if n.kids)
