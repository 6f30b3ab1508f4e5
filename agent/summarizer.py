"""The compactor's summary call, made through the model router.

The auxiliary compression model (``auxiliary.compression.*``) answers first;
the main model is its fallback, so a broken summary model costs a retry, not
the conversation's memory.
"""

from __future__ import annotations

from agent.compressor import SummaryRequest
from agent.messages import ChatMessage
from agent.providers.base import ModelRequest
from agent.providers.router import ModelRouter

SUMMARIZER_SYSTEM = (
    "You condense conversations into handoff notes for another assistant. "
    "Follow the requested structure exactly and write nothing else."
)


class ModelSummarizer:
    """A :data:`agent.compressor.Summarizer` backed by a model router."""

    def __init__(self, router: ModelRouter) -> None:
        self._router = router

    async def __call__(self, request: SummaryRequest) -> str:
        response = await self._router.complete(
            ModelRequest(
                model=self._router.primary.model,
                system=SUMMARIZER_SYSTEM,
                messages=[ChatMessage.user(request.prompt)],
                # Room above the target length, so a summary is never cut off mid-section.
                max_tokens=int(request.max_tokens * 1.5) + 256,
            )
        )
        return response.message.content
