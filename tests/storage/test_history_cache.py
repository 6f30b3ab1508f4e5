"""The in-memory history cache is bounded by bytes, not by messages."""

from __future__ import annotations

from storage.cache import RECORD_OVERHEAD, HistoryCache, record_size
from storage.records import MessageRecord, message_record


def record(seq: int, content: str = "hi") -> MessageRecord:
    return message_record(seq, "s", seq, "user", content, (), None, None, None, None, 0.0, None)


def test_a_large_tool_output_counts_by_its_size() -> None:
    assert record_size(record(1, "x" * 10_000)) == RECORD_OVERHEAD + 10_000
    cache = HistoryCache(max_bytes=3 * (RECORD_OVERHEAD + 10_000))
    cache.put("a", [record(1, "x" * 10_000)])
    cache.put("b", [record(1, "x" * 10_000)])
    cache.extend("a", [record(2, "x" * 10_000)])  # a is now the most recent and holds two
    cache.put("c", [record(1, "x" * 10_000)])  # over the bound: the least recently used goes
    assert cache.get("b") is None
    assert [r.seq for r in cache.get("a") or []] == [1, 2] and cache.get("c") is not None


def test_many_small_histories_fit_where_one_huge_does_not() -> None:
    cache = HistoryCache(max_bytes=100 * (RECORD_OVERHEAD + 2))
    for n in range(100):
        cache.put(f"s{n}", [record(1)])
    assert all(cache.get(f"s{n}") is not None for n in range(100))
    cache.put("huge", [record(1, "x" * 100 * RECORD_OVERHEAD)])
    assert cache.get("huge") is None  # bigger than the whole cache: not kept, nothing evicted for it
    assert cache.get("s0") is not None
    cache.discard("s0")
    cache.put("s0", [record(1), record(2)])  # one more record than before: the oldest entry gives way
    assert cache.get("s1") is None and cache.get("s0") is not None
