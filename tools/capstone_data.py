"""The data file of the GPT capstone: a sample of the standard-library corpus, tokenized, beside the notebook.

The capstone's notebook may not import the course's package (the grader reads any such import as a call of
the reference), so the text it trains on at length travels as a file in the assignment's folder, which
`make exercises` copies into the release: ``python_stdlib_sample.npz``, read with ``numpy.load``.

* ``train``: the first training files of :mod:`course_lib.datasets.python_stdlib`, whole, up to
  :data:`TRAIN_CHARS` characters, as uint16 token ids of chapter 1's BPE (``<|endoftext|>`` after each file);
* ``held_out``: the *last* held-out files up to :data:`HELD_OUT_CHARS` characters. The grader judges a
  recipe on the *first* held-out files (``grader.assignments.capstone_gpt``), which this file never holds;
* ``vocab_bytes`` and ``vocab_offsets``: token ``t`` is ``vocab_bytes[offsets[t]:offsets[t + 1]]``.

    python -m tools.capstone_data            # write the file
    python -m tools.capstone_data --check    # exit 1 if the committed file is not what the corpus gives
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


def serialize(data: dict[str, np.ndarray]) -> bytes:
    out = io.BytesIO()
    np.savez_compressed(out, **data)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare the committed file with the corpus")
    args = parser.parse_args(argv)
    data = arrays()
    if args.check:
        with np.load(PATH) as have:
            same = sorted(have.files) == sorted(data) and all(np.array_equal(have[k], data[k]) for k in data)
        verdict = "up to date" if same else "differs from the corpus: run python -m tools.capstone_data"
        print(f"{PATH.relative_to(ROOT)}: {verdict}")
        return 0 if same else 1
    PATH.write_bytes(serialize(data))
    print(f"wrote {PATH.relative_to(ROOT)}: {len(data['train']):,} training and {len(data['held_out']):,} held-out "
          f"tokens, {PATH.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
