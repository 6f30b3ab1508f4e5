"""Property test: whatever the conversation, a compaction leaves it well-formed.

Random conversations (parallel tool calls, tool loops, repeated user messages,
replies without text, no system prompt) are compacted once or twice, with a
summary model that sometimes fails and callers that sometimes must fit. After
every attempt:

- every tool message answers a call of the assistant message right before its group;
- every call has exactly one result;
- user/assistant turns alternate, except where the input already repeated that role;
- the last user message survives verbatim;
- the head and the tail survive verbatim (the system prompt gains the note once);
- an attempt that did not compact returns the input unchanged.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.compression.boundaries import last_user_index
from agent.compression.framing import COMPACTION_NOTE, is_summary, summary_body
from agent.compressor import CompressionResult, ContextCompressor
from agent.messages import ChatMessage
from tests.agent.test_compressor_support import FakeClock, FakeSummarizer, call, estimate


@dataclass
class Ids:
    """Unique ids and texts across the rounds of one example."""

    next: int = 0

    def take(self) -> int:
        self.next += 1
        return self.next


@st.composite
def turns(draw: st.DrawFn, ids: Ids) -> list[ChatMessage]:
    """One user turn: one or two user messages, zero or more tool rounds, maybe a closing reply."""
    size = st.integers(min_value=0, max_value=1_200)
    messages = [ChatMessage.user(f"ask-{ids.take()} " + "u" * draw(size))]
    if draw(st.integers(0, 9)) == 0:
        messages.append(ChatMessage.user(f"ask-{ids.take()} again"))
    for _ in range(draw(st.integers(0, 3))):
        calls = [call(f"c{ids.take()}", draw(st.sampled_from(["read_file", "terminal", "search"])), path="a.py")
                 for _ in range(draw(st.integers(1, 3)))]
        text = draw(st.sampled_from(["", f"thinking-{ids.take()}"]))
        messages.append(ChatMessage.assistant(text, calls))
        results = [ChatMessage.tool(c.id, f"out-{ids.take()} " + "r" * draw(size), tool_name=c.name) for c in calls]
        messages += draw(st.permutations(results))
    if draw(st.integers(0, 4)) > 0:
        messages.append(ChatMessage.assistant(f"reply-{ids.take()} " + "a" * draw(size)))
    return messages


@st.composite
def conversations(draw: st.DrawFn, ids: Ids, *, system: bool) -> list[ChatMessage]:
    messages = [ChatMessage.system("You are Switchboard.")] if system else []
    for _ in range(draw(st.integers(1, 18))):
        messages += draw(turns(ids))
    return messages


def same_role_pairs(messages: list[ChatMessage]) -> set[str]:
    return {a.role for a, b in itertools.pairwise(messages) if a.role == b.role and a.role in ("user", "assistant")}


def assert_tool_pairs(messages: list[ChatMessage]) -> None:
    pending: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if message.role == "tool":
            assert message.tool_call_id in pending, f"result {message.tool_call_id} answers no preceding call"
            pending.discard(message.tool_call_id)
            answered.add(message.tool_call_id or "")
            continue
        assert not pending, f"calls without a result: {pending}"
        pending = {c.id for c in message.tool_calls}
    assert not pending, f"calls without a result: {pending}"
    calls = [c.id for m in messages for c in m.tool_calls]
    assert sorted(calls) == sorted(answered) and len(set(calls)) == len(calls)


def assert_well_formed(before: list[ChatMessage], result: CompressionResult, protect_first_n: int) -> None:
    after = result.messages
    assert_tool_pairs(after)
    assert same_role_pairs(after) <= same_role_pairs(before)
    last_user = last_user_index(before)
    if last_user is not None:
        assert any(m is before[last_user] for m in after), "the last user message was lost"
    if not result.compacted:
        assert after == before and result.dropped == 0
        return
    (index,) = [i for i, m in enumerate(after) if is_summary(m) and summary_body(m) == result.summary]
    assert [i for i, m in enumerate(after) if is_summary(m)] == [index], "an earlier summary was kept beside the new one"
    head, tail = after[:index], after[index + 1 :]
    assert index >= min(protect_first_n, len(before)) and len(tail) >= 1
    assert index + len(tail) < len(before), "nothing was condensed"
    assert head[1:] == before[1:index] and tail == before[len(before) - len(tail) :]
    if head and head[0].role == "system":
        assert head[0].content.count(COMPACTION_NOTE) == 1
        assert head[0].content.replace(f"\n\n{COMPACTION_NOTE}", "") == before[0].content.replace(
            f"\n\n{COMPACTION_NOTE}", ""
        )
    elif head:
        assert head[0] == before[0]
    if last_user is not None and last_user >= index:
        assert before[last_user] in tail


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
async def test_compaction_keeps_every_conversation_well_formed(data: st.DataObject) -> None:
    ids = Ids()
    protect_first_n = data.draw(st.integers(0, 4), label="protect_first_n")
    replies = data.draw(st.lists(st.sampled_from(["## Goal\nnotes", "fail"]), min_size=2, max_size=2))
    summarizer = FakeSummarizer([RuntimeError("down") if r == "fail" else f"{r} {i}" for i, r in enumerate(replies)])
    compressor = ContextCompressor(
        data.draw(st.integers(1_000, 40_000), label="context_length"),
        protect_first_n=protect_first_n,
        protect_last_n=data.draw(st.integers(1, 24), label="protect_last_n"),
        summarizer=summarizer,
        clock=FakeClock(),
        estimate=estimate,
    )
    messages = data.draw(conversations(ids, system=data.draw(st.integers(0, 9)) > 0), label="conversation")
    for _ in range(data.draw(st.integers(1, 2), label="rounds")):
        must_fit = data.draw(st.booleans(), label="must_fit")
        result = await compressor.compress(messages, must_fit=must_fit, force=data.draw(st.booleans()))
        assert_well_formed(messages, result, protect_first_n)
        event(f"{result.reason}{' (local summary)' if result.used_local_summary else ''}")
        messages = result.messages + data.draw(turns(ids), label="more")
