"""Streaming encode in bounded memory: peak memory of ``Tokenizer.encode_iterable`` on a large file.

    python benchmarks/tokenizer_stream.py [--megabytes 50] [--vocab 512]

Writes a text file of ``--megabytes`` MB (the course's own prose, its lines
shuffled and numbered so that no two stretches repeat exactly), trains a
byte-level BPE tokenizer of ``--vocab`` ids on its first 200 kB, then encodes
the whole file in a fresh process, line by line, counting the ids without
keeping them. It reports the time, the throughput and the process's peak
resident memory, beside the peak of a process that only imports the
tokenizer and reads the file line by line (the floor). For comparison it
also encodes one tenth of the file with ``encode`` on the whole string.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import sys, time
sys.path.insert(0, {root!r})
from course_lib.tokenizer import Tokenizer
tok = Tokenizer.load({model!r})
mode, path = {mode!r}, {path!r}
start = time.perf_counter()
n = 0
with open(path, encoding="utf-8") as f:
    if mode == "stream":
        for _ in tok.encode_iterable(f):
            n += 1
    elif mode == "whole":
        n = len(tok.encode(f.read()))
    else:  # floor: read the file line by line, encode nothing
        for _ in f:
            n += 1
secs = time.perf_counter() - start
# VmHWM: this process's peak resident memory in KiB (unlike ru_maxrss, not inherited from the parent)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(n, secs, hwm)
"""


def course_text() -> list[str]:
    paths = [ROOT / "README.md", ROOT / "intro.md", ROOT / "glossary.md", *sorted((ROOT / "chapters").rglob("*.md"))]
    lines = [line for p in paths for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise SystemExit("no course prose found to build the file from")
    return lines


def write_file(path: Path, megabytes: float, seed: int = 0) -> int:
    rng, lines, size, k = random.Random(seed), course_text(), 0, 0
    target = int(megabytes * 1e6)
    with open(path, "w", encoding="utf-8") as f:
        while size < target:
            line = f"{k}: {rng.choice(lines)}\n"
            f.write(line)
            size += len(line.encode("utf-8"))
            k += 1
    return size


def run(mode: str, model: Path, path: Path) -> tuple[int, float, float]:
    code = CHILD.format(root=str(ROOT), model=str(model), mode=mode, path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), float(out[1]), int(out[2]) / 1024  # ids, seconds, peak resident memory in MiB


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--megabytes", type=float, default=50.0)
    ap.add_argument("--vocab", type=int, default=512)
    args = ap.parse_args(argv)
    if not args.megabytes > 0:
        ap.error(f"--megabytes {args.megabytes}: must be positive")
    if args.vocab < 256:
        ap.error(f"--vocab {args.vocab}: must be at least 256 (one id per byte)")

    from course_lib.tokenizer import GPT2_SPLIT_PATTERN, Tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        big, small, model = Path(tmp) / "big.txt", Path(tmp) / "small.txt", Path(tmp) / "tok.bpe"
        size = write_file(big, args.megabytes)
        small_size = write_file(small, args.megabytes / 10, seed=1)
        tok = Tokenizer(GPT2_SPLIT_PATTERN)
        with open(big, encoding="utf-8") as f:
            head = f.read(200_000)
        tok.train(head, args.vocab, special_tokens=["<|endoftext|>"])
        tok.save(model)
        print(f"file: {size / 1e6:.1f} MB; tokenizer: {len(tok)} ids (GPT-2 pattern)")
        _, _, floor = run("floor", model, big)
        n, secs, peak = run("stream", model, big)
        print(f"encode_iterable: {n:,} ids in {secs:.1f} s ({size / 1e6 / secs:.2f} MB/s); "
              f"peak memory {peak:.1f} MiB (reading the file alone: {floor:.1f} MiB)")
        n_w, secs_w, peak_w = run("whole", model, small)
        print(f"encode on the whole string, {small_size / 1e6:.1f} MB: {n_w:,} ids in {secs_w:.1f} s; "
              f"peak memory {peak_w:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
