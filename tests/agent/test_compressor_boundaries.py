"""Where the compressor cuts, which role the summary takes, and how tool pairs are repaired."""

from __future__ import annotations

from agent.compression.boundaries import Boundaries, find_boundaries, head_end, last_user_index, tail_start
from agent.compression.framing import CLEARED_TOOL_OUTPUT, summary_message
from agent.compression.pruning import describe_result, prune_tool_results
from agent.compression.repair import STUB_RESULT, place_summary, repair_tool_pairs, summary_role
from agent.messages import ChatMessage
from tests.agent.test_compressor_support import call, chat, conversation, estimate

U, A = ChatMessage.user, ChatMessage.assistant


def one_token(message: ChatMessage) -> int:
    return 1


def roles(messages: list[ChatMessage]) -> str:
    return "".join(m.role[0] for m in messages)


# -- head and tail ------------------------------------------------------------------------


def test_the_head_is_the_system_prompt_and_first_exchange() -> None:
    assert head_end(chat(("hi", "hello"), ("a", "b")), 3) == 3


def test_the_head_keeps_the_results_of_a_call_that_ends_it() -> None:
    messages = conversation(3)  # s u a(call) t a u ...
    assert head_end(messages, 3) == 4
    assert messages[3].role == "tool"


def test_the_tail_keeps_at_least_protect_last_n_messages() -> None:
    messages = chat(*[(f"q{i}", f"a{i}") for i in range(10)])
    assert tail_start(messages, 3, protect_last_n=4, budget=0, estimate=one_token) == len(messages) - 4


def test_the_tail_grows_while_the_token_budget_lasts() -> None:
    messages = chat(*[(f"q{i}", f"a{i}") for i in range(10)])
    assert tail_start(messages, 3, protect_last_n=2, budget=7, estimate=one_token) == len(messages) - 7


def test_the_tail_never_starts_inside_a_tool_group() -> None:
    messages = conversation(6)  # every exchange is u a(call) t a
    for last_n in range(1, 20):
        start = tail_start(messages, 4, protect_last_n=last_n, budget=0, estimate=one_token)
        assert messages[start].role != "tool"
        if messages[start - 1].role == "assistant":
            assert not messages[start - 1].tool_calls


def test_a_cut_inside_a_group_moves_the_whole_group_into_the_tail() -> None:
    parallel = A("", [call("c1"), call("c2"), call("c3")])
    results = [ChatMessage.tool(f"c{i}", f"r{i}") for i in (1, 2, 3)]
    messages = [*chat(("q0", "a0")), U("q1"), parallel, *results, A("done"), U("q2"), A("a2")]
    start = tail_start(messages, 3, protect_last_n=4, budget=0, estimate=one_token)
    assert messages[start] is parallel


def test_the_last_user_message_is_always_in_the_tail() -> None:
    tool_loop = [A("", [call(f"c{i}")]) if j == 0 else ChatMessage.tool(f"c{i}", "x" * 800)
                 for i in range(10) for j in range(2)]
    messages = [*chat(("q0", "a0"), ("q1", "a1")), U("fix the build"), *tool_loop, A("working on it")]
    start = tail_start(messages, 3, protect_last_n=3, budget=50, estimate=estimate)
    assert start == last_user_index(messages) == 5


def test_no_boundaries_when_head_and_tail_cover_everything() -> None:
    messages = chat(("q0", "a0"), ("q1", "a1"), ("q2", "a2"))
    assert find_boundaries(messages, protect_first_n=3, protect_last_n=4, tail_budget=0, estimate=one_token) is None
    found = find_boundaries(messages, protect_first_n=3, protect_last_n=2, tail_budget=0, estimate=one_token)
    assert found == Boundaries(3, 5)


def test_a_summary_is_not_the_last_user_message() -> None:
    messages = [*chat(("q0", "a0")), U("real question"), A("answer"), summary_message("notes", "user")]
    assert last_user_index(messages) == 3


# -- the summary's role -------------------------------------------------------------------


def test_summary_role_differs_from_both_neighbours() -> None:
    assert summary_role("assistant", "assistant") == "user"
    assert summary_role("user", "user") == "assistant"
    assert summary_role("tool", "user") == "assistant"
    assert summary_role("system", "assistant") == "user"
    assert summary_role("assistant", "user") is None


def test_between_assistant_and_user_the_tail_grows_back_to_an_assistant_turn() -> None:
    messages = chat(*[(f"q{i}", f"a{i}") for i in range(6)])  # s u a u a ...
    placement = place_summary(messages, Boundaries(3, 9))
    assert placement is not None and placement == place_summary(messages, placement.bounds)
    assert placement.bounds == Boundaries(3, 8) and placement.role == "user"
    assert messages[2].role == "assistant" and messages[8].role == "assistant"


def test_a_tool_group_before_the_tail_comes_along_whole() -> None:
    messages = [*chat(("q0", "a0")), U("q1"), A("", [call("c1")]), ChatMessage.tool("c1", "r"), U("q2"), A("a2")]
    placement = place_summary(messages, Boundaries(3, 6))
    assert placement is not None and placement.bounds == Boundaries(3, 4) and placement.role == "user"
    assert roles(messages[4:]) == "atua"


def test_a_longer_head_can_make_room_for_the_summary() -> None:
    messages = [U("q"), A("", [call("c1")]), ChatMessage.tool("c1", "r1"), A("so far"),
                A("", [call("c2")]), ChatMessage.tool("c2", "r2")]
    placement = place_summary(messages, Boundaries(1, 4))
    assert placement is not None
    assert placement.bounds == Boundaries(3, 4) and placement.role == "user"


def test_no_placement_when_every_cut_would_repeat_a_role() -> None:
    messages = [U("q"), A("", [call("c1")]), ChatMessage.tool("c1", "r"), A("reply")]
    assert place_summary(messages, Boundaries(1, 3)) is None


# -- tool pairs ---------------------------------------------------------------------------


def test_results_without_their_call_are_dropped() -> None:
    messages = [U("q"), ChatMessage.tool("gone", "orphan"), A("a")]
    repair = repair_tool_pairs(messages)
    assert repair.messages == [messages[0], messages[2]] and repair.dropped_results == 1


def test_calls_without_results_get_a_stub() -> None:
    messages = [U("q"), A("", [call("c1"), call("c2", "terminal")]), ChatMessage.tool("c1", "ok"), U("next")]
    repair = repair_tool_pairs(messages)
    assert roles(repair.messages) == "uattu" and repair.stubbed_calls == 1
    stub = repair.messages[3]
    assert (stub.tool_call_id, stub.tool_name, stub.content) == ("c2", "terminal", STUB_RESULT)


def test_calls_still_running_at_the_end_are_left_alone() -> None:
    messages = [U("q"), A("", [call("c1")])]
    assert repair_tool_pairs(messages).messages == messages


def test_a_well_formed_conversation_is_not_touched() -> None:
    messages = conversation(5)
    repair = repair_tool_pairs(messages)
    assert repair.messages == messages and repair.dropped_results == repair.stubbed_calls == 0


# -- phase 1 ------------------------------------------------------------------------------


def test_a_pruned_result_says_what_the_call_did() -> None:
    command = call("c1", "terminal", command="pytest -q tests/api", timeout=120)
    output = "collected 10 items\n" + "." * 300 + "\nFAILED tests/api/test_users.py::test_create - assert 201 == 500\n"
    line = describe_result(ChatMessage.tool("c1", output, tool_name="terminal"), command)
    assert line == (
        '[tool output cleared] terminal command="pytest -q tests/api" timeout=120 -> 384 chars, 3 lines; '
        "first error: FAILED tests/api/test_users.py::test_create - assert 201 == 500"
    )
    assert "\n" not in line


def test_a_result_with_nothing_known_about_its_call_gets_the_generic_line() -> None:
    assert describe_result(ChatMessage.tool("c9", "x" * 500), None) == CLEARED_TOOL_OUTPUT
    assert describe_result(ChatMessage.tool("c9", "x" * 500, tool_name="search"), None).startswith(
        "[tool output cleared] search -> 500 chars"
    )


def test_only_results_over_200_characters_are_pruned_and_only_once() -> None:
    messages = [ChatMessage.tool("a", "x" * 200), ChatMessage.tool("b", "y" * 201), U("z" * 900)]
    pruned, count = prune_tool_results(messages, {})
    assert count == 1 and pruned[0] is messages[0] and pruned[2] is messages[2]
    assert pruned[1].content == CLEARED_TOOL_OUTPUT
    assert prune_tool_results(pruned, {}) == (pruned, 0)
