"""What ``bench.storage`` does to any storage engine: the messages it writes and the timed calls, through the contract.

The corpus (agent-like turns, ~5 % Chinese), the rare words planted in the preload to look for, the
concurrent appends of 100 conversations and the timed reads (searches, history loads) are the same
for SQLite and PostgreSQL, so the two engines' figures answer the same question. Everything measured
here goes through ``StorageEngine`` members (``create_session``, ``append_messages``, ``search``,
``load_messages``); how each engine is preloaded and set up is the engine's own module's business.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Final

from bench.common import percentile
from storage import NewMessage, StorageEngine

CJK_SHARE: Final = 0.05
WORD_COUNT: Final = 20_000
HAN: Final = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后小么心多天而能好都然没日于起还发成事只作当想看无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切规装"
PLANTED_COPIES: Final = 5
"""Messages each planted word is put in: every search looks for a word with exactly this many hits."""


class Corpus:
    """Deterministic agent-like messages."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = ["".join(self.rng.choice(letters) for _ in range(self.rng.randint(2, 9))) for _ in range(WORD_COUNT)]
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(WORD_COUNT)))
        self.tools = ["terminal", "read_file", "web_search", "write_file", "memory"]

    def text(self, size: int) -> str:
        if self.rng.random() < CJK_SHARE:
            return "".join(self.rng.choice(HAN) for _ in range(max(4, size // 3)))
        words = self.rng.choices(self.words, cum_weights=self.cum_weights, k=max(1, size // 6))
        out = " ".join(words)
        return out[:size]

    def turn(self, call_no: int) -> list[NewMessage]:
        call_id = f"call_{call_no:08d}"
        tool = self.rng.choice(self.tools)
        arguments = json.dumps({"query": self.text(60), "path": f"/srv/app/{self.rng.choice(self.words)}.py"})
        return [
            NewMessage("user", self.text(self.rng.randint(100, 500)), token_estimate=75),
            NewMessage(
                "assistant",
                self.text(self.rng.randint(20, 200)),
                tool_calls=[{"id": call_id, "name": tool, "arguments": arguments}],
                token_estimate=50,
            ),
            NewMessage("tool", self.text(self.rng.randint(300, 1000)), tool_call_id=call_id, tool_name=tool),
            NewMessage("assistant", self.text(self.rng.randint(150, 700)), token_estimate=105),
        ]

    def messages(self, count: int, start: int = 0) -> list[NewMessage]:
        out: list[NewMessage] = []
        call_no = start
        while len(out) < count:
            out.extend(self.turn(call_no))
            call_no += 1
        return out[:count]

    def workload(self, sessions: int, per_session: int) -> list[list[NewMessage]]:
        """What ``sessions`` conversations append in the timed part: ``per_session`` messages each."""
        return [self.messages(per_session, start=10_000_000 + s * per_session) for s in range(sessions)]


def planted_words(rng: random.Random, count: int) -> dict[str, list[str]]:
    """``count`` words of each kind the searches look for: rare Latin words and 2- and 3-character CJK words."""
    rare_han = "鑫龘齉靐麤饕餮魑魅魍魉彧犇淼焱垚鱻骉羴赑"
    pairs = [a + b for a in rare_han for b in rare_han if a != b]
    triples = [a + b + c for a, b, c in zip(rare_han, rare_han[1:] + rare_han[:1], rare_han[2:] + rare_han[:2])]
    return {
        "rare": [f"zq{index:03d}xv" for index in range(count)],
        "cjk2": rng.sample(pairs, count),
        "cjk3": rng.sample(triples, min(count, len(triples))),
    }


def plant_spots(rng: random.Random, planted: dict[str, list[str]], messages: int) -> dict[int, str]:
    """Which of ``messages`` preloaded messages (by their order of writing) gets which planted word."""
    words = [word for kind in planted.values() for word in kind for _ in range(PLANTED_COPIES)]
    return dict(zip(rng.sample(range(messages), len(words)), words))


def with_word(message: NewMessage, word: str) -> NewMessage:
    """``message`` with ``word`` standing alone in its text."""
    return replace(message, content=f"{message.content[:200]} {word} {message.content[200:]}")


def message_bytes(message: NewMessage) -> int:
    calls = json.dumps([call.to_dict() for call in message.tool_calls]) if message.tool_calls else ""
    return len(message.content.encode()) + len(calls.encode())


async def concurrent_appends(store: StorageEngine, workload: list[list[NewMessage]]) -> tuple[float, list[float]]:
    """Messages/s and per-call latencies (s): one new session per conversation, all appending at once, one
    message per call, each call awaited before the conversation's next."""
    sessions = [
        await store.create_session(session_key=f"bench:{s}", platform="telegram", chat_id=str(s))
        for s in range(len(workload))
    ]
    latencies: list[float] = []

    async def converse(session_id: str, messages: list[NewMessage]) -> None:
        for message in messages:
            started = time.perf_counter()
            await store.append_messages(session_id, [message])
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(converse(s.id, m) for s, m in zip(sessions, workload)))
    elapsed = time.perf_counter() - started
    return len(latencies) / elapsed, latencies


async def timed(call: Callable[[], Awaitable[object]], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


SEARCHES: Final = (
    ("rare", "search_p50_ms", lambda word: word),
    ("cjk2", "search_cjk2_p50_ms", lambda word: word),
    ("cjk3", "search_cjk3_p50_ms", lambda word: word),
    ("rare", "search_prefix_p50_ms", lambda word: word[:5] + "*"),  # "zq003*": the 5 messages of "zq003xv"
)
"""Each timed search: the kind of planted word, the figure's name, and the query made of the word."""


async def searches(store: StorageEngine, planted: dict[str, list[str]], repeat: int) -> dict[str, float]:
    """Median ms of each search of ``SEARCHES`` over every planted word of its kind."""
    results: dict[str, float] = {}
    for kind, key, query_of in SEARCHES:
        samples: list[float] = []
        for word in planted[kind]:
            query = query_of(word)
            hits = await store.search(query)
            if len(hits) < PLANTED_COPIES:  # a CJK pair may also sit inside a planted triple
                raise RuntimeError(f"benchmark broken: {len(hits)} hits for {query!r} (planted {kind} word {word!r})")
            samples += await timed(lambda q=query: store.search(q), repeat)
        results[key] = statistics.median(samples) * 1000
    return results


async def substring_searches(store: StorageEngine, words: list[str], repeat: int) -> float:
    """Median ms to find the inside of planted rare words ("q003x" of "zq003xv", 5 messages each)."""
    samples: list[float] = []
    for word in words:
        inside = word[1:-1]
        hits = await store.search(inside)
        if len(hits) != PLANTED_COPIES or not all(word in hit.snippet for hit in hits):
            raise RuntimeError(f"benchmark broken: {len(hits)} substring hits for {inside!r} (inside {word!r})")
        samples += await timed(lambda w=inside: store.search(w), repeat)
    return statistics.median(samples) * 1000


async def history_loads(
    store: StorageEngine, session_ids: Sequence[str], messages: int, repeat: int
) -> dict[str, float]:
    """Median us to load a ``messages``-long history: ``_cold`` the first load of each session, else loads after it."""
    cold: list[float] = []
    for session_id in session_ids:
        cold += await timed(lambda sid=session_id: store.load_messages(sid), 1)
    warm: list[float] = []
    for session_id in session_ids:
        history = await store.load_messages(session_id)
        if len(history) != messages:
            raise RuntimeError(f"benchmark broken: {session_id} has {len(history)} messages, not {messages}")
        warm += await timed(lambda sid=session_id: store.load_messages(sid), repeat)
    return {"history_load_us": statistics.median(warm) * 1e6, "history_load_cold_us": statistics.median(cold) * 1e6}


async def reads(
    store: StorageEngine, planted: dict[str, list[str]], *, quick: bool, sessions: int, per_session: int
) -> dict[str, float]:
    """Every timed read on a preloaded store: the searches, the substring search and the history loads of
    sessions ``pre00000`` .. spread over the ``sessions`` preloaded ones of ``per_session`` messages each."""
    repeat = 5 if quick else 20
    results = await searches(store, planted, repeat=repeat)
    results["search_substring_p50_ms"] = await substring_searches(store, planted["rare"], repeat)
    count = 100 if quick else 300
    session_ids = [f"pre{s:05d}" for s in range(0, sessions, sessions // count)][:count]
    results.update(await history_loads(store, session_ids, per_session, repeat=repeat))
    return results


def append_figures(rounds: Sequence[tuple[float, float, list[float]]]) -> dict[str, float]:
    """The append figures of ``(floor rows/s, store messages/s, store latencies)`` rounds: medians of the rates
    and of their ratio, percentiles over every latency of every round."""
    latencies = [sample for _, _, samples in rounds for sample in samples]
    return {
        "appends_per_s": statistics.median(rate for _, rate, _ in rounds),
        "raw_floor_per_s": statistics.median(raw_rate for raw_rate, _, _ in rounds),
        "ratio_to_floor": statistics.median(rate / raw_rate for raw_rate, rate, _ in rounds),
        "append_p50_ms": percentile(latencies, 50) * 1000,
        "append_p99_ms": percentile(latencies, 99) * 1000,
        "append_max_ms": max(latencies) * 1000,
    }
