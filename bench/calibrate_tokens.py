"""Refit the per-class weights of ``agent.tokens`` against tiktoken o200k_base.

Run by hand when the estimator's classes change (it is not a benchmark and
``make bench`` does not run it)::

    python -m bench.calibrate_tokens [--seed 1] [--count 150]

It prints the fitted weights (to copy into agent/tokens.py as constants) and,
for each category, the ratio estimate / real tokens with the current and the
fitted weights. The fit minimises the squared *relative* error per sample, with
every category weighted equally, and keeps every weight non-negative.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from agent import tokens
from bench.token_samples import FIT_CATEGORIES, samples
from bench.tokenizer_data import load_encoding

NAMES = (
    "lower", "upper", "digit", "punct", "space", "newline",
    "word", "punct_run", "cjk", "emoji", "emoji_joiner", "other",
    "blob_char", "blob_switch",
)  # fmt: skip


def fit_nonnegative(rows: Sequence[Sequence[float]], sweeps: int = 3000) -> list[float]:
    """Least squares of ``row . w = 1`` over rows with w >= 0 (projected coordinate descent)."""
    width = len(rows[0])
    gram = [[sum(r[i] * r[j] for r in rows) for j in range(width)] for i in range(width)]
    rhs = [sum(r[i] for r in rows) for i in range(width)]
    weights = [0.3] * width
    for _ in range(sweeps):
        for i in range(width):
            if gram[i][i] == 0:
                continue
            residual = rhs[i] - sum(gram[i][j] * weights[j] for j in range(width) if j != i)
            weights[i] = max(0.0, residual / gram[i][i])
    return weights


def ratios(weights: Sequence[float], counts: list[tuple[int, ...]], truth: list[int]) -> float:
    estimate = sum(sum(n * w for n, w in zip(c, weights)) for c in counts)
    return estimate / sum(truth)


def calibrate(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=150)
    args = parser.parse_args(argv)
    encoding = load_encoding("o200k_base")
    data: dict[str, tuple[list[tuple[int, ...]], list[int], int]] = {}
    rows: list[list[float]] = []
    for category in FIT_CATEGORIES:
        texts = samples(category, seed=args.seed, count=args.count)
        counts = [tokens._class_counts(t) for t in texts]  # noqa: SLF001 - the fit mirrors the estimator
        truth = [len(encoding.encode(t)) for t in texts]
        data[category] = (counts, truth, sum((len(t) + 3) // 4 for t in texts))
        rows += [[n / y for n in c] for c, y in zip(counts, truth) if y]
    fitted = fit_nonnegative(rows)
    for name, value in zip(NAMES, fitted):
        print(f"{name.upper()}_WEIGHT: Final = {value:.3f}")
    print(f"{'category':10s} current  fitted  chars/4  (fitted per-sample p5..p95)")
    for category, (counts, truth, quarters) in data.items():
        chars4 = quarters / sum(truth)
        each = sorted(ratios(fitted, [c], [y]) for c, y in zip(counts, truth))
        spread = f"{each[len(each) // 20]:.2f}..{each[-1 - len(each) // 20]:.2f}"
        current = ratios(tokens._WEIGHTS, counts, truth)  # noqa: SLF001
        print(f"{category:10s} {current:7.3f} {ratios(fitted, counts, truth):7.3f} {chars4:7.3f}  {spread}")


if __name__ == "__main__":
    calibrate()
