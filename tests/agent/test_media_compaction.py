"""Compaction with pictures and documents: the summary model gets one line per attachment, the
compacted conversation keeps none of the condensed turns' files (through the real anthropic SDK
against the fake model server)."""

from __future__ import annotations



from agent.caching import CachePolicy
from agent.compressor import ContextCompressor
from agent.media import MediaPart
from agent.messages import ChatMessage
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.summarizer import ModelSummarizer
from tests.agent.media_support import SENT_TEXT, image_part, pdf_part, png
from tests.agent.test_compressor_support import FakeSummarizer
from tests.fakes.model_server import ModelServer, Text

PICTURE = png(64, 40)


def middle_with_media() -> tuple[list[ChatMessage], MediaPart, MediaPart]:
    early = image_part(PICTURE, 1280, 800, size=212_000)
    late = image_part(PICTURE, 64, 40, name="later.png")
    messages = [ChatMessage.system("You are a test."), ChatMessage.user("hello"), ChatMessage.assistant("hi")]
    messages += [ChatMessage(role="user", content="what is wrong here?", media=(early,)),
                 ChatMessage.assistant("The traceback says KeyError: 'user_id' in handlers.py line 42."),
                 ChatMessage(role="user", content="", media=(pdf_part(size=94_000),)),
                 ChatMessage.assistant("The report says revenue rose 12 percent.")]  # fmt: skip
    for index in range(8):  # more than the tail's budget in any estimate: the pictures above are in the middle
        messages += [ChatMessage.user(f"question {index} " + "words " * 600), ChatMessage.assistant(f"answer {index}")]
    messages += [ChatMessage(role="user", content="and this one?", media=(late,))]
    return messages, early, late


async def test_compaction_gives_the_summariser_one_line_per_attachment_and_keeps_the_tail_media(
    claude: AnthropicProvider, model_server: ModelServer
) -> None:
    router = ModelRouter([ModelTarget(claude, "claude-sonnet-4-6", CachePolicy(True, True))], RetryPolicy(max_attempts=1))
    compressor = ContextCompressor(20_000, protect_last_n=4, summarizer=ModelSummarizer(router))
    messages, early, late = middle_with_media()
    notes = "## Goal\nFix the bug.\n\n## Attachments\n[photo: screenshot of a KeyError traceback, sent 2026-11-27 14:02 UTC]"
    model_server.script(Text(notes))
    result = await compressor.compress(messages, force=True)
    assert result.compacted
    summary_call = model_server.last_request
    assert summary_call.media == []  # the summariser gets no files
    prompt = summary_call.last_user_text
    assert f"[attachment: photo 'screen.png' (image/png, 1280x800, 212 KB, {SENT_TEXT})]" in prompt
    assert f"[attachment: document 'report.pdf' (application/pdf, 2 pages, 94 KB, {SENT_TEXT})]" in prompt
    assert "## Attachments" in prompt and "[photo: screenshot of a Python traceback, sent" in prompt
    # The compacted history: no parts from the middle, the summary's lines, the tail's picture kept.
    kept = [part for message in result.messages for part in message.media]
    assert kept == [late] and early not in kept
    summary = next(message for message in result.messages if message.meta.get("summary"))
    assert "[photo: screenshot of a KeyError traceback" in summary.content


async def test_without_the_summary_model_the_local_summary_lists_the_attachments() -> None:
    messages, _, late = middle_with_media()
    compressor = ContextCompressor(20_000, protect_last_n=4, summarizer=FakeSummarizer([RuntimeError("down")]))
    result = await compressor.compress(messages, must_fit=True)
    assert result.used_local_summary
    assert f"## Attachments\n- [attachment: photo 'screen.png' (image/png, 1280x800, 212 KB, {SENT_TEXT})]" in result.summary
    assert [part for message in result.messages for part in message.media] == [late]
