"""The capstones' data files, beside their notebooks: what the learner's own model trains on at length.

A capstone's notebook may not import the course's package (the grader reads any such import as a call of
the reference), so the data it trains on at length travels as a file in the assignment's folder, which
`make exercises` copies into the release, read with ``numpy.load``.

The GPT capstone's ``python_stdlib_sample.npz``, a sample of the standard-library corpus, tokenized:

* ``train``: the first training files of :mod:`course_lib.datasets.python_stdlib`, whole, up to
  :data:`TRAIN_CHARS` characters, as uint16 token ids of chapter 1's BPE (``<|endoftext|>`` after each file);
* ``held_out``: the *last* held-out files up to :data:`HELD_OUT_CHARS` characters. The grader judges a
  recipe on the *first* held-out files (``grader.assignments.capstone_gpt``), which this file never holds;
* ``vocab_bytes`` and ``vocab_offsets``: token ``t`` is ``vocab_bytes[offsets[t]:offsets[t + 1]]``.

The ViT capstone's ``mnist_digits.npz``, MNIST's digits as :mod:`course_lib.datasets.mnist` splits them:

* ``train_images`` ``(3500, 28, 28)`` uint8 (0 background, 255 ink) and ``train_labels`` ``(3500,)``;
* ``val_images`` and ``val_labels``, 500 more. The grader judges a recipe on the ``test`` split, which this
  file never holds (and which the grading kernel cannot read: ``grader.sandbox.HELD_OUT_DATA``).

    python -m tools.capstone_data            # write the files
    python -m tools.capstone_data --check    # exit 1 if a committed file is not what its source gives
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np

from grader.assignments.capstone_gpt import encode_documents

ROOT = Path(__file__).resolve().parents[1]
PATH = ROOT / "solutions" / "08x-capstone-gpt" / "python_stdlib_sample.npz"
DIGITS_PATH = ROOT / "solutions" / "11x-capstone-vit" / "mnist_digits.npz"
TRAIN_CHARS, HELD_OUT_CHARS = 3_800_000, 220_000


def arrays() -> dict[str, np.ndarray]:
    from course_lib.datasets import python_stdlib

    tok = python_stdlib.tokenizer()
    pieces = [tok.vocab[i] for i in range(len(tok.vocab))] + [python_stdlib.EOT.encode()]
    offsets = np.cumsum([0] + [len(p) for p in pieces]).astype(np.int64)
    return {"train": encode_documents(python_stdlib.documents("train"), TRAIN_CHARS).numpy().astype(np.uint16),
            "held_out": encode_documents(reversed(python_stdlib.documents("held_out")), HELD_OUT_CHARS)
            .numpy().astype(np.uint16),
            "vocab_bytes": np.frombuffer(b"".join(pieces), dtype=np.uint8), "vocab_offsets": offsets}


def digit_arrays() -> dict[str, np.ndarray]:
    from course_lib.datasets import mnist

    out = {}
    for split in ("train", "val"):
        images, labels = mnist.load(split)
        out[f"{split}_images"] = ((images[:, 0] + 1) * (255 / 2)).round().numpy().astype(np.uint8)
        out[f"{split}_labels"] = labels.numpy().astype(np.uint8)
    return out


#: every data file, and what it holds
FILES = {PATH: arrays, DIGITS_PATH: digit_arrays}


def serialize(data: dict[str, np.ndarray]) -> bytes:
    out = io.BytesIO()
    np.savez_compressed(out, **data)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare the committed file with the corpus")
    args = parser.parse_args(argv)
    failed = 0
    for path, make in FILES.items():
        data = make()
        if args.check:
            with np.load(path) as have:
                same = sorted(have.files) == sorted(data) and all(np.array_equal(have[k], data[k]) for k in data)
            verdict = "up to date" if same else "differs from its source: run python -m tools.capstone_data"
            print(f"{path.relative_to(ROOT)}: {verdict}")
            failed += not same
            continue
        path.write_bytes(serialize(data))
        sizes = ", ".join(f"{k} {v.shape}" for k, v in data.items() if "vocab" not in k)
        print(f"wrote {path.relative_to(ROOT)}: {sizes}, {path.stat().st_size / 1e6:.2f} MB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
