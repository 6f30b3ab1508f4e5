"""Prompt-cache benchmark (issue 4): how much of the prompt the cache serves, and what it saves.

Everything runs through the real code path: ``ToolLoop`` + ``ContextCompressor``
+ ``ModelSummarizer`` + ``ModelRouter`` + ``AnthropicProvider`` and the real
``anthropic`` SDK, against the fake model server
(``tests.fakes.model_server.ModelServer``) started here on 127.0.0.1:0. The
fake counts a block as ``ceil(len(its canonical JSON) / 4)`` tokens and keeps a
cache entry alive for its TTL after last use, on a clock only this benchmark
moves: hours of user silence cost no real time. The cache-share conversation
streams (the production setting); the cost sweeps call ``messages.create``
without streaming, which reports the same usage for less CPU, and run in
``WORKERS`` processes, each with its own fake server.

The conversation
----------------
A scripted assistant session, built from a seed and the same for every
strategy and gap profile: a frozen system prompt of ~2,000 characters, four
tools with JSON schemas, and per user turn

* a user message of 60-600 characters, one in seven with a pasted code block;
* 0-3 tool steps (35/35/20/10 %), each one call or (one in five) two concurrent
  calls, sometimes after a short preamble; results are source files, JSON
  search or listing output, or log lines of 300-3,500 characters;
* a final reply of 200-1,500 characters.

The model takes 0.8-3 s of fake time per call and a tool 0.2-4 s. The
compressor gets a small window (``CONTEXT_LENGTH`` = 40,000, so it compacts at
20,000 prompt tokens, every 10-15 turns); summary calls get a structured note
of 3,000-5,000 characters back. ``ModelSummarizer`` sends no cache markers, so
summary calls are never cached; they are counted (see below).

Figures
-------
``cache_read_share``: cache_read / (uncached + cache_read + cache_creation)
over every call from turn 3 of one 60-turn conversation (``chatty`` gaps,
default ``cache_ttl: auto``), summary calls included: the honest figure.
``cache_read_share_turns`` leaves the summary calls out. ``compactions``
counts the compactions of that conversation.

``input_cost_ratio_<profile>`` (the default, ``auto``), ``seed_5m_ratio_<profile>``
(the seed's fixed 5m) and ``fixed_1h_ratio_<profile>``: input cost with caching
over input cost without, for every call of the profile's conversations. With
caching: uncached x 1.0 + cache_read x 0.1 + cache_creation x 1.25 (5m) or 2.0
(1h), the TTL taken from the markers of that very request; without: prompt
tokens x 1.0 (the same request without markers). Summary calls cost 1.0 on both
sides. The printed table also gives the ratio over turn calls only.

For ``auto`` the benchmark does what the gateway is meant to do: a per-session
``TtlAdvisor("auto")`` observes the fake time of every user message and the
turn's TTL is ``choose(new_share)``, where new_share is the estimated tokens
the previous turn added (tool traffic, reply, the new user message) over the
estimated prompt now (0.1 at first). ``ToolLoop.run`` takes one TTL per turn,
so every call of the turn is labelled with it.

``experiment_<name>_ratio_<profile>`` are candidate changes and sensitivity
checks, never the reported default; ``experiments()`` describes each (a
hindsight bound, a warm/cold TTL rule, a per-call TTL, the model's real window).
``--quick`` runs 2 conversations per profile and three experiments; the full run
5 conversations and all of them.

The user's gap profiles are described in bench/cache_script.py.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import statistics
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import structlog

from agent.caching import READ_PRICE, WRITE_PRICE, CachePolicy, Ttl, TtlAdvisor
from agent.compressor import CompressionResult, ContextCompressor
from agent.loop import LoopSettings, ToolLoop
from agent.messages import ChatMessage
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import ModelRequest, ModelResponse, Provider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.summarizer import ModelSummarizer
from agent.tokens import estimate_message
from bench.cache_script import (
    Conversation,
    FIVE_MINUTES_SAFE,
    HOUR,
    MINUTE,
    ONE_HOUR_SAFE,
    PROFILES,
    SYSTEM_PROMPT,
    ScriptedModel,
    ScriptedTools,
    build_conversation,
    is_summary_call,
    user_gaps,
)
from bench.common import say
from tests.fakes.model_server import ModelServer, RequestRecord

Figures = dict[str, Any]

MODEL = "claude-sonnet-4-6"
CONTEXT_LENGTH = 40_000
"""Small on purpose: the compressor fires at half of it (20,000 prompt tokens)."""
PROTECT_LAST_N = 20
"""The shipped default of ``compression.protect_last_n``."""
SHARE_TURNS = 60
SHARE_FROM_TURN = 3
SHARE_SEED = 101
COST_TURNS = 48
COST_CONVERSATIONS = {"quick": 2, "full": 5}
COST_SEED_BASE = 201
WORKERS = 2
"""Worker processes for the cost sweeps (one job per gap profile and strategy); the box has two cores."""

TARGETS = {
    "cache_read_share": (">=", 0.85),
    "input_cost_ratio_sparse": ("<=", 0.33),
    "input_cost_ratio_mixed": ("<=", 0.24),
}
REFERENCE = {  # the issue's own simulation, printed for comparison
    "seed_5m": {"chatty": 0.16, "mixed": 0.28, "sparse": 0.52},
    "fixed_1h": {"chatty": 0.15, "mixed": 0.23, "sparse": 0.33},
}

# -- running one conversation ---------------------------------------------------------------


TTL_SECONDS: dict[Ttl, float] = {"5m": 5 * MINUTE, "1h": HOUR}
MIDDLE_SHARE_LIMIT = (WRITE_PRICE["1h"] - WRITE_PRICE["5m"]) / WRITE_PRICE["1h"]
"""Experiments: a 1h write of tokens that a 5m entry would also keep until the next call pays 0.75 extra;
it saves a rewrite (about 2.0) only when the next gap falls between 5 and 60 minutes. So 5m is the
cheaper label for such tokens while that share of gaps is under 0.75 / 2.0 = 0.375."""


@dataclass(frozen=True, slots=True)
class Strategy:
    name: str
    configured: Literal["5m", "1h", "auto"] = "auto"
    experiment: str = ""
    """Empty for the reported strategies; otherwise what the experiment changes."""
    constants: tuple[tuple[str, float], ...] = ()
    """Experiment: ``TtlAdvisor`` class constants to override."""
    tool_steps: bool = False
    """Experiment: 5m for the calls that carry tool results while 5-60 minute gaps are rare
    (``ToolLoop`` has one TTL per turn, so this needs a change there)."""
    warm_cold: Literal["off", "start", "start+compaction"] = "off"
    """Experiment: ``WarmColdAdvisor``'s cold TTL for a turn that starts with an expired cache (and,
    with ``+compaction``, for the calls after a compaction in the turn)."""
    oracle: bool = False
    """Experiment: pick each turn's TTL knowing the gap before the next user message."""
    context_length: int = CONTEXT_LENGTH

    def advisor(self) -> TtlAdvisor:
        base = WarmColdAdvisor if self.warm_cold != "off" else TtlAdvisor
        cls = type("ExperimentAdvisor", (base,), dict(self.constants)) if self.constants else base
        return cls(self.configured)


@dataclass(frozen=True, slots=True)
class TurnTtls:
    turn: Ttl
    """Passed to ``ToolLoop.run`` (every call of the turn, unless an experiment relabels one)."""
    tool_steps: Ttl | None = None
    after_compaction: Ttl | None = None


def turn_ttls(strategy: Strategy, advisor: TtlAdvisor, share: float, expired: bool, next_gap: float | None) -> TurnTtls:
    """The TTLs of one turn: ``advisor.choose(share)`` for the reported strategies."""
    if strategy.oracle:
        return TurnTtls(oracle_ttl(next_gap))
    steps: Ttl | None = "5m" if strategy.tool_steps and middle_share(advisor) < MIDDLE_SHARE_LIMIT else None
    if not isinstance(advisor, WarmColdAdvisor):
        return TurnTtls(advisor.choose(share, cold=expired), steps)
    after = advisor.choose_for(share, cold=True) if strategy.warm_cold == "start+compaction" else None
    return TurnTtls(advisor.choose_for(share, cold=expired), steps, after)


def oracle_ttl(next_gap: float | None) -> Ttl:
    """The cheapest TTL in hindsight (a turn's own calls take up to ~20 s of fake time)."""
    if next_gap is None or next_gap < FIVE_MINUTES_SAFE:
        return "5m"
    return "1h" if next_gap < ONE_HOUR_SAFE else "5m"


class WarmColdAdvisor(TtlAdvisor):
    """Experiment: one TTL for warm turns and one for turns that start with an expired cache.

    The gateway knows when its last call was and which TTL it used, so it knows a turn will start
    cold. Writing a whole prefix at 2.0 to keep it an hour only pays when 5-60 minute gaps are common.
    """

    def choose_for(self, new_share: float, cold: bool) -> Ttl:
        """Now the default rule (``TtlAdvisor.choose`` with ``cold``); kept for the experiment labels."""
        return self.choose(new_share, cold=cold)


def middle_share(advisor: TtlAdvisor) -> float:
    """The advisor's estimate of the share of gaps between 5 and 60 minutes."""
    f5, f60 = advisor.shares()
    return f60 - f5


class PerCallTtl(Provider):
    """Experiments only: a TTL per call inside a turn, which ``ToolLoop`` cannot express today.

    ``tool_step_ttl`` relabels the calls that carry tool results; ``compacted_ttl`` relabels
    every call of the turn after a compaction in it (``compacted`` is set by the observer).
    """

    name = "anthropic"

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self.tool_step_ttl: Ttl | None = None
        self.compacted_ttl: Ttl | None = None
        self.compacted = False

    async def complete(self, request: ModelRequest, *, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        if request.cache_ttl is not None:
            if self.compacted and self.compacted_ttl is not None:
                request = replace(request, cache_ttl=self.compacted_ttl)
            elif self.tool_step_ttl is not None and request.messages and request.messages[-1].role == "tool":
                request = replace(request, cache_ttl=self.tool_step_ttl)
        return await self._inner.complete(request, on_text=on_text)


class CompactionCounter:
    def __init__(self, listener: PerCallTtl) -> None:
        self.compactions = 0
        self._listener = listener

    async def on_message(self, message: ChatMessage) -> None:
        return None

    async def on_compaction(self, result: CompressionResult) -> None:
        self.compactions += 1
        self._listener.compacted = True

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Call:
    turn: int
    summary: bool
    prompt: int
    read: int
    creation: int
    ttl: Ttl | None
    first_of_turn: bool

    @property
    def uncached(self) -> int:
        return self.prompt - self.read - self.creation

    @property
    def cost(self) -> float:
        write = WRITE_PRICE[self.ttl] if self.ttl else 0.0
        return self.uncached + READ_PRICE * self.read + write * self.creation


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)
    ttls: list[Ttl] = field(default_factory=list)
    compactions: int = 0


def _request_ttl(record: RequestRecord) -> Ttl | None:
    marks = [block.cache_control for block in record.blocks if block.cache_control is not None]
    if not marks:
        return None
    return "1h" if any(str(mark.get("ttl", "5m")) == "1h" for mark in marks) else "5m"


async def run_conversation(
    server: ModelServer, provider: Provider, conversation: Conversation, gaps: Sequence[float], strategy: Strategy
) -> Run:
    server.reset()
    model = ScriptedModel(server, conversation)
    server.responder = model
    tools = ScriptedTools(server)
    steps = PerCallTtl(provider)
    provider = steps if strategy.tool_steps or strategy.warm_cold == "start+compaction" else provider
    router = ModelRouter([ModelTarget(provider, MODEL, CachePolicy(True, True, "bench"))], RetryPolicy(max_attempts=1))
    engine = ContextCompressor(
        strategy.context_length,
        protect_last_n=PROTECT_LAST_N,
        summarizer=ModelSummarizer(router),
        clock=server.clock.now,
        estimate=estimate_message,
    )
    loop = ToolLoop(router, engine, tools, estimate=estimate_message, settings=LoopSettings())
    advisor = strategy.advisor()
    counter = CompactionCounter(steps)
    history = [ChatMessage.system(SYSTEM_PROMPT)]
    known: int | None = None
    run = Run()
    previous_start: int | None = None  # estimated prompt when the previous turn started
    share = 0.1
    ended_at: float | None = None  # when the previous turn's last call ended...
    last_ttl: Ttl = "5m"  # ...and the TTL it was written with
    for index, (turn, gap) in enumerate(zip(conversation.turns, gaps, strict=True)):
        server.clock.advance(gap)
        advisor.observe(server.clock.now())
        history.append(ChatMessage.user(turn.user))
        estimated = sum(map(estimate_message, history))
        if previous_start is not None and estimated > previous_start:
            share = (estimated - previous_start) / estimated
        previous_start = estimated
        expired = ended_at is not None and server.clock.now() - ended_at >= TTL_SECONDS[last_ttl]
        ttls = turn_ttls(strategy, advisor, share, expired, gaps[index + 1] if index + 1 < len(gaps) else None)
        ttl = ttls.turn
        steps.tool_step_ttl, steps.compacted_ttl, steps.compacted = ttls.tool_steps, ttls.after_compaction, False
        run.ttls.append(ttl)
        model.load(turn)
        tools.load(turn)
        before = len(server.requests)
        compactions = counter.compactions
        result = await loop.run(history, cache_ttl=ttl, observer=counter, known_prompt_tokens=known)
        history, known = result.history, result.last_prompt_tokens
        ended_at, last_ttl = server.clock.now(), ttl
        if counter.compactions != compactions:
            previous_start = None
        first = True
        for record in server.requests[before:]:
            if record.figures is None:
                raise RuntimeError(f"the fake model server answered {record.status}: {record.response}")
            summary = is_summary_call(record)
            figures = record.figures
            run.calls.append(
                Call(
                    index,
                    summary,
                    figures.prompt_tokens,
                    figures.cache_read,
                    figures.cache_creation,
                    _request_ttl(record),
                    first and not summary,
                )
            )
            first = first and summary
    if model.unscripted:
        raise RuntimeError(f"{model.unscripted} model calls had no scripted step: the script and the loop disagree")
    run.compactions = counter.compactions
    return run


# -- figures --------------------------------------------------------------------------------


def read_share(calls: Sequence[Call]) -> float:
    prompt = sum(call.prompt for call in calls)
    return sum(call.read for call in calls) / prompt if prompt else 0.0


def cost_ratio(calls: Sequence[Call]) -> float:
    prompt = sum(call.prompt for call in calls)
    return sum(call.cost for call in calls) / prompt if prompt else 0.0


def _met(key: str, value: float) -> bool:
    op, bound = TARGETS[key]
    return value >= bound if op == ">=" else value <= bound


@dataclass
class Bench:
    server: ModelServer
    streaming: AnthropicProvider
    """The production path (``stream=True``), used for the cache-share conversation."""
    plain: AnthropicProvider
    """``messages.create`` without streaming: the same usage figures for less CPU, for the sweeps."""


async def _with_bench(body: Callable[[Bench], Awaitable[Figures]]) -> Figures:
    server = ModelServer()
    await server.start()
    streaming = AnthropicProvider(api_key="bench", base_url=server.base_url, timeout=30.0)
    plain = AnthropicProvider(api_key="bench", base_url=server.base_url, timeout=30.0, stream=False)
    try:
        return await body(Bench(server, streaming, plain))
    finally:
        await streaming.aclose()
        await plain.aclose()
        await server.stop()


async def share_section(bench: Bench) -> Figures:
    conversation = build_conversation(SHARE_TURNS, SHARE_SEED)
    gaps = user_gaps("chatty", SHARE_TURNS, SHARE_SEED)
    run = await run_conversation(bench.server, bench.streaming, conversation, gaps, SHARE_STRATEGY)
    counted = [call for call in run.calls if call.turn >= SHARE_FROM_TURN - 1]
    turns_only = [call for call in counted if not call.summary]
    summaries = [call for call in counted if call.summary]
    cold = sorted({call.turn + 1 for call in turns_only if call.read < call.prompt // 2})
    prompts = [call.prompt for call in run.calls if not call.summary]
    say(
        f"  {SHARE_TURNS} turns (chatty gaps, cache_ttl auto), {len(run.calls)} calls of which "
        f"{sum(c.summary for c in run.calls)} summary; compactions {run.compactions}; "
        f"prompt {min(prompts):,}-{max(prompts):,} tokens (median {int(statistics.median(prompts)):,})"
    )
    say(
        f"  from turn {SHARE_FROM_TURN}: read {sum(c.read for c in counted):,} / input "
        f"{sum(c.prompt for c in counted):,} tokens; written {sum(c.creation for c in counted):,}; "
        f"summary calls (never cached) {sum(c.prompt for c in summaries):,}"
    )
    say(f"  turns with a call that read under half its prompt from cache: {cold or 'none'}")
    say(f"  TTLs chosen: {dict(Counter(run.ttls))}")
    return {
        "cache_read_share": read_share(counted),
        "cache_read_share_turns": read_share(turns_only),
        "compactions": run.compactions,
        "cache_share_calls": len(counted),
    }


BIG_WINDOW = 1_000_000
"""claude-sonnet-4-6's window in agent/context_window.py: no compaction within 48 turns."""
# The cost comparison runs with the model's real window, as a chat would; the share figure above
# uses the small window so that compactions happen. The small window is kept as an experiment.
SHARE_STRATEGY = Strategy("auto", "auto")
"""The default policy on the small window, so the 60-turn share conversation compacts several times."""
DEFAULT = Strategy("auto", "auto", context_length=BIG_WINDOW)
SEED = Strategy("seed_5m", "5m", context_length=BIG_WINDOW)
ONE_HOUR = Strategy("fixed_1h", "1h", context_length=BIG_WINDOW)
REPORTED: dict[str, str] = {"auto": "input_cost_ratio", "seed_5m": "seed_5m_ratio", "fixed_1h": "fixed_1h_ratio"}


def experiments(quick: bool) -> list[Strategy]:
    """Candidate changes and a sensitivity check, measured beside the default and labelled as such."""
    per_call = "(needs a per-call TTL in ToolLoop)"
    quick_trials = [
        Strategy(
            "oracle_next_gap",
            experiment="hindsight: 5m if the next gap is under 5 min, else 1h if under 1 h (a bound, not a policy)",
            oracle=True,
        ),
        Strategy(
            "window_40k_auto",
            experiment=f"the default with a {CONTEXT_LENGTH:,}-token window: small prompts, frequent compactions",
        ),
    ]
    if quick:
        return quick_trials
    return [
        *quick_trials,
        Strategy(
            "warm_cold_steps",
            experiment=f"warm_cold, its cold TTL also after a compaction, and tool_steps_5m {per_call}",
            warm_cold="start+compaction",
            tool_steps=True,
        ),
        Strategy(
            "warm_cold_compaction",
            experiment=f"warm_cold, and its cold TTL for the calls after a compaction {per_call}",
            warm_cold="start+compaction",
        ),
        Strategy(
            "tool_steps_5m",
            experiment=f"5m on calls carrying tool results while the estimated 5-60 min gap share < 0.375 {per_call}",
            tool_steps=True,
        ),
        Strategy("prior_weight_1", experiment="TtlAdvisor.PRIOR_WEIGHT 3 -> 1", constants=(("PRIOR_WEIGHT", 1.0),)),
        Strategy("window_40k_seed_5m", "5m", f"the seed (5m) with the {CONTEXT_LENGTH:,}-token window"),
        Strategy("window_40k_fixed_1h", "1h", f"fixed 1h with the {CONTEXT_LENGTH:,}-token window"),
    ]


def strategies(quick: bool) -> list[Strategy]:
    """The reported three, then the experiments."""
    return [SEED, DEFAULT, ONE_HOUR, *experiments(quick)]


def _row(strategy: Strategy, profile: str, runs: Sequence[Run]) -> str:
    """One printed line: ratio, where the tokens went, how often a turn started warm, TTL choices."""
    calls = [call for run in runs for call in run.calls]
    turn_calls = [call for call in calls if not call.summary]
    firsts = [call for call in turn_calls if call.first_of_turn]
    warm = sum(call.read >= call.prompt // 2 for call in firsts) / len(firsts)
    prompt = sum(call.prompt for call in calls)
    written = Counter()
    for call in calls:
        if call.ttl:
            written[call.ttl] += call.creation
    ttls = Counter(ttl for run in runs for ttl in run.ttls)
    reference = REFERENCE.get(strategy.name, {}).get(profile)
    shown = f"[{reference:.2f}]" if reference is not None else ""
    return (
        f"    {strategy.name:22s} {cost_ratio(calls):.3f} {cost_ratio(turn_calls):.3f} {shown:>6s}"
        f"  {read_share(calls):5.1%} {written['5m'] / prompt:5.1%} {written['1h'] / prompt:5.1%}"
        f" {sum(c.uncached for c in calls) / prompt:5.1%}  {warm:4.0%}  {ttls['1h']:3d}/{sum(ttls.values()):<3d}"
        f"  {sum(r.compactions for r in runs)}"
    )


def gap_summary(profile: str, quick: bool) -> str:
    conversations = COST_CONVERSATIONS["quick" if quick else "full"]
    flat = [gap for i in range(conversations) for gap in user_gaps(profile, COST_TURNS, COST_SEED_BASE + i)[1:]]
    f5 = sum(g < 5 * MINUTE for g in flat) / len(flat)
    f60 = sum(g < HOUR for g in flat) / len(flat)
    return f"  [{profile}] gaps: {f5:.0%} under 5 min, {f60:.0%} under 1 h, median {statistics.median(flat):,.0f} s"


TABLE_HEAD = (
    f"    {'strategy':22s} {'ratio':>5s} {'turns':>5s} {'issue':>6s}  {'read':>5s} {'w5m':>5s} {'w1h':>5s}"
    f" {'unc':>5s}  warm   1h     cmp"
)


async def strategy_costs(bench: Bench, profile: str, strategy: Strategy, quick: bool) -> tuple[str, Figures]:
    """One strategy on one gap profile: its printed line and figures."""
    conversations = COST_CONVERSATIONS["quick" if quick else "full"]
    runs = []
    for i in range(conversations):
        script = build_conversation(COST_TURNS, COST_SEED_BASE + i)
        gaps = user_gaps(profile, COST_TURNS, COST_SEED_BASE + i)
        runs.append(await run_conversation(bench.server, bench.plain, script, gaps, strategy))
    ratio = cost_ratio([call for run in runs for call in run.calls])
    if strategy.experiment:
        figures: Figures = {f"experiment_{strategy.name}_ratio_{profile}": ratio}
    else:
        figures = {f"{REPORTED[strategy.name]}_{profile}": ratio}
    if strategy is DEFAULT:
        ttls = Counter(ttl for run in runs for ttl in run.ttls)
        figures[f"auto_1h_turn_share_{profile}"] = ttls["1h"] / sum(ttls.values())
    return _row(strategy, profile, runs), figures


def _quiet_logs() -> None:
    # The compressor logs every compaction and context-pressure warning; they would bury the table.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


def strategy_job(profile: str, index: int, quick: bool) -> tuple[str, Figures]:
    """Strategy ``index`` on ``profile`` in a worker process with its own fake server (CPU-bound)."""
    _quiet_logs()
    strategy = strategies(quick)[index]
    return asyncio.run(_with_bench(lambda bench: strategy_costs(bench, profile, strategy, quick)))


def _cost_header(quick: bool) -> None:
    conversations = COST_CONVERSATIONS["quick" if quick else "full"]
    say(f"  {conversations} conversations x {COST_TURNS} turns per profile, the same content for every strategy.")
    say("  ratio: input cost with caching / without, all calls, then turn calls only; issue: the issue's simulation;")
    say("  shares of input tokens read / written 5m / written 1h / uncached; turns whose first call was warm;")
    say("  turns labelled 1h; compactions. Experiments (none of them is the reported default):")
    for trial in experiments(quick):
        say(f"    {trial.name}: {trial.experiment}")


def prompt_cache(args: argparse.Namespace) -> Figures:
    """The issue-4 section: cache read share and input cost ratios (see the module docstring)."""
    saved = structlog.get_config()
    _quiet_logs()
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=WORKERS, mp_context=context) as pool:
            count = len(strategies(args.quick))
            jobs = {
                profile: [pool.submit(strategy_job, profile, index, args.quick) for index in range(count)]
                for profile in PROFILES
            }
            say("  -- cache read share")
            figures = asyncio.run(_with_bench(share_section))
            say("  -- input cost by TTL strategy and gap profile")
            _cost_header(args.quick)
            for profile, profile_jobs in jobs.items():
                say(gap_summary(profile, args.quick))
                say(TABLE_HEAD)
                for job in profile_jobs:
                    line, part = job.result()
                    say(line)
                    figures.update(part)
    except Exception as error:  # noqa: BLE001 - report it as a figure so the estimator's figures survive
        traceback.print_exc()
        return {"prompt_cache_error": f"{type(error).__name__}: {error}"}
    finally:
        structlog.configure(**saved)
    missed = [key for key in TARGETS if not _met(key, figures[key])]
    for key, (op, bound) in TARGETS.items():
        say(f"  target {key} {op} {bound}: {figures[key]:.3f} {'met' if key not in missed else 'MISSED'}")
    if figures["compactions"] < 2:
        missed.append("compactions")
        say(f"  the share conversation compacted only {figures['compactions']} times (needs >= 2)")
    figures["targets_met"] = not missed
    figures["targets_missed"] = ",".join(missed)
    return figures
