"""A model stream cut off mid-answer, through the whole gateway: the turn is retried, not reported as a bug."""

from __future__ import annotations

from tests.fakes.model_server import CutStream, ModelServer, Text
from tests.gateway.conftest import GatewayFactory, settled


async def test_a_cut_stream_is_retried_and_what_it_billed_is_on_the_session(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway()
    # message_start (the prompt's usage), ping, the text block's start and a delta, then the connection drops.
    model_server.script(CutStream(Text("The first try, cut off before it was whole."), after=4), Text("the second try"))
    await running.adapter.inject("hello there", chat_id="c1")
    (sent,) = await running.adapter.wait_sent(1)
    assert sent.text == "the second try"  # not "Sorry, something went wrong on my side"
    await settled(running.store)
    cut, whole = model_server.requests
    assert cut.figures is not None and whole.figures is not None
    (session,) = await running.store.list_sessions()
    prompt = session.input_tokens + session.cache_read_tokens + session.cache_write_tokens
    assert prompt == cut.figures.prompt_tokens + whole.figures.prompt_tokens  # both prompts were billed
    assert session.cost_usd > 0
