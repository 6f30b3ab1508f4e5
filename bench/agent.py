"""Agent benchmarks: ``python -m bench.agent [--quick] [--json]``.

Each section is a function that takes the parsed arguments and returns its
figures; ``main`` runs every section in ``SECTIONS`` and merges the figures
into one dict, printed as a table (and with ``--json`` as one JSON object on
the last line). Add a section by writing a function and listing it there.

Sections:

- ``estimator``: the token estimator (``agent.tokens``). Speed: microseconds
  to estimate a message seen for the first time, to add one message to a
  session's tally (estimates are remembered per message) versus recounting a
  200-message history with tool calls, beside the reference's approach (chars/4
  of every message's serialised dict, recomputed on each check); nanoseconds
  per character of text, and of blobs (which take a slower path). Accuracy:
  estimate / real tokens (tiktoken o200k_base) per category, beside chars/4, on
  samples the weights were not fitted on (``blob`` has kinds the fit never saw).
- ``prompt_cache`` (``bench/cache_sim.py``): issue 4. The share of input tokens
  served from the prompt cache over a 60-turn conversation with tool calls and
  compactions, and the input cost with caching relative to none for chatty,
  mixed and sparse users, for the default ``cache_ttl: auto`` beside the seed's
  fixed 5m and a fixed 1h, through the real loop, compressor, provider and SDK
  against the fake model server.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent.messages import ChatMessage, ToolCall
from agent.tokens import TokenTally, estimate_message, estimate_text
from bench.cache_sim import TARGETS as CACHE_TARGETS
from bench.cache_sim import prompt_cache
from bench.common import emit, parse_args, percentile, say
from bench.token_samples import CATEGORIES, EXTRA_CATEGORIES, samples
from bench.tokenizer_data import TokenizerUnavailable, load_encoding

Figures = dict[str, Any]

TARGETS = {
    "estimate_ratio_min": ">= 0.8",
    "estimate_ratio_max": "<= 1.3",
    **{key: f"{op} {bound}" for key, (op, bound) in CACHE_TARGETS.items()},
}

HISTORY_MESSAGES = 200
ACCURACY_SEED = 2  # bench/calibrate_tokens.py fits on seed 1
TOOLS = ("read_file", "web_search", "run_python", "list_files")


def build_history(size: int = HISTORY_MESSAGES, seed: int = 7) -> list[ChatMessage]:
    """A realistic session: user turns in several scripts, tool calls with JSON and code results."""
    rng = random.Random(seed)
    pools = {category: samples(category, seed=seed, count=size) for category in CATEGORIES}
    history: list[ChatMessage] = []
    turn = 0
    while len(history) < size:
        user_kind = rng.choices(("english", "chinese", "japanese", "emoji"), weights=(6, 2, 1, 1))[0]
        history.append(ChatMessage.user(pools[user_kind][turn % size]))
        for call_index in range(rng.randint(0, 2)):
            call_id = f"call_{turn:04d}_{call_index}"
            tool = rng.choice(TOOLS)
            arguments = json.dumps({"path": f"src/module_{turn}.py", "query": pools["english"][turn % size][:60]})
            history.append(ChatMessage.assistant("", [ToolCall(id=call_id, name=tool, arguments=arguments)]))
            output = pools["python" if tool in ("read_file", "run_python") else "json"][(turn + call_index) % size]
            history.append(ChatMessage.tool(call_id, output, tool_name=tool))
        history.append(ChatMessage.assistant(pools["english"][(turn * 7) % size]))
        turn += 1
    return history[:size]


def reference_estimate(history: Sequence[ChatMessage]) -> int:
    """The reference's check: chars/4 of every message's dict repr, recomputed each time."""
    return (sum(len(str(message.to_dict())) for message in history) + 3) // 4


def _median_us(run: Callable[[], object], rounds: int, per_round: int = 1) -> float:
    timings = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        run()
        timings.append((time.perf_counter_ns() - start) / 1_000 / per_round)
    return statistics.median(timings)


def _ns_per_char(texts: Sequence[str], rounds: int) -> float:
    """``estimate_text`` over ``texts``, in nanoseconds per character (the fastest round: the least disturbed)."""
    characters = sum(map(len, texts))
    best = math.inf
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for text in texts:
            estimate_text(text)
        best = min(best, (time.perf_counter_ns() - start) / characters)
    return best


def estimator_speed(args: argparse.Namespace) -> Figures:
    history = build_history()
    rounds = 30 if args.quick else 300

    def append_all() -> None:
        tally = TokenTally()
        for message in history:
            tally.add(message)
            _ = tally.total

    def recount() -> int:
        return sum(map(estimate_message, history))

    def first_sight() -> None:  # what a message costs the first time (estimate_message remembers the result)
        for message in history:
            estimate_text(message.content)
            for call in message.tool_calls:
                estimate_text(call.arguments)

    tally = TokenTally(history)
    per_append = _median_us(append_all, rounds, per_round=len(history))
    per_new = _median_us(first_sight, rounds, per_round=len(history))
    full = _median_us(recount, rounds)
    reference = _median_us(lambda: reference_estimate(history), rounds)
    read = _median_us(lambda: [tally.total for _ in range(1_000)], rounds, per_round=1_000)
    prose = [text for category in CATEGORIES if category != "blob" for text in samples(category, seed=ACCURACY_SEED, count=20)]
    blobs = samples("blob", seed=ACCURACY_SEED, count=60)
    characters = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in history)
    say(f"  history: {len(history)} messages, {characters:,} characters, estimate {tally.total:,} tokens")
    return {
        "estimate_us_per_new_message": per_new,
        "estimate_us_per_append": per_append,
        "estimate_us_full": full,
        "estimate_full_over_append": full / per_append,
        "estimate_us_read_total": read,
        "estimate_ns_per_char": _ns_per_char(prose, rounds),
        "estimate_ns_per_char_blob": _ns_per_char(blobs, rounds),
        "reference_us_full_repr_chars4": reference,
    }


def _ratio(estimates: Sequence[int], real: Sequence[int]) -> float:
    return sum(estimates) / sum(real)


def estimator_accuracy(args: argparse.Namespace) -> Figures:
    try:
        encoding = load_encoding("o200k_base")
    except TokenizerUnavailable as exc:
        say(f"  accuracy skipped: {exc}")
        return {"estimate_accuracy_error": str(exc)}
    count = 60 if args.quick else 300
    figures: Figures = {}
    per_sample: list[float] = []
    say(f"  estimate / o200k_base tokens, {count} samples per category (seed {ACCURACY_SEED}):")
    say(f"    {'category':10s} {'ours':>6s} {'chars/4':>8s}")
    for category in (*CATEGORIES, *EXTRA_CATEGORIES):
        texts = samples(category, seed=ACCURACY_SEED, count=count)
        real = [len(encoding.encode(text)) for text in texts]
        ours = [estimate_text(text) for text in texts]
        quarters = [math.ceil(len(text) / 4) for text in texts]
        figures[f"estimate_ratio_{category}"] = _ratio(ours, real)
        figures[f"chars4_ratio_{category}"] = _ratio(quarters, real)
        extra = "   (not in the target)" if category in EXTRA_CATEGORIES else ""
        say(f"    {category:10s} {_ratio(ours, real):6.3f} {_ratio(quarters, real):8.3f}{extra}")
        if category in CATEGORIES:
            per_sample += [e / r for e, r in zip(ours, real) if r]
    for prefix in ("estimate", "chars4"):
        values = [figures[f"{prefix}_ratio_{c}"] for c in CATEGORIES]
        figures[f"{prefix}_ratio_min"], figures[f"{prefix}_ratio_max"] = min(values), max(values)
    figures["estimate_ratio_sample_p5"] = percentile(per_sample, 5)
    figures["estimate_ratio_sample_p95"] = percentile(per_sample, 95)
    return figures


SECTIONS: dict[str, Callable[[argparse.Namespace], Figures]] = {
    "estimator_speed": estimator_speed,
    "estimator_accuracy": estimator_accuracy,
    "prompt_cache": prompt_cache,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("Agent benchmarks (token estimator, prompt cache).", argv)
    results: Figures = {}
    for name, section in SECTIONS.items():
        say(f"-- {name}")
        results.update(section(args))
    emit(results, as_json=args.json, targets=TARGETS)
    return 1 if any(key.endswith("_error") for key in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
