"""Asking the transcription endpoint for its model list, a read-only call: it shows the endpoint is reachable and
takes the key, without sending it audio (a transcription costs money on OpenAI and minutes on a small server)."""

from __future__ import annotations

from typing import Final

import openai

from config import LoadedConfig
from gateway.media.transcribe import Transcriber
from gateway.operations.doctor.results import Check

NAME: Final = "voice"
MAX_WAIT: Final = 15.0
"""Seconds the model list may take (less than media.transcription.timeout when that is longer)."""


def transcription_skip(loaded: LoadedConfig) -> Check | None:
    """The line when there is nothing to ask: media off or no transcription configured."""
    if not loaded.settings.media.enabled:
        return Check.skip(NAME, "media.enabled is false: files, voice notes included, are not read")
    if loaded.settings.media.transcription is None:
        return Check.skip(NAME, "media.transcription is not set: users are told voice notes are not supported here")
    return None


async def transcription_check(loaded: LoadedConfig) -> Check:
    skipped = transcription_skip(loaded)
    if skipped is not None:
        return skipped
    config = loaded.settings.media.transcription
    assert config is not None
    where = f"{config.model} at {config.endpoint}"
    if not config.api_key and not config.base_url:
        return Check.fail(NAME, f"{where}: no key ({loaded.looked_for(['media.transcription.api_key'])})",
                          f"set OPENAI_API_KEY in {loaded.home / '.env'} or media.transcription.api_key")  # fmt: skip
    transcriber = Transcriber(config)
    try:
        listed = await transcriber.listed_models(timeout=min(config.timeout, MAX_WAIT))
    except openai.APIStatusError as error:
        return _refused(error.status_code, where, loaded)
    except openai.APITimeoutError:
        return Check.fail(NAME, f"{where}: no answer within {min(config.timeout, MAX_WAIT):g} s",
                          "check that the server runs and media.transcription.base_url")  # fmt: skip
    except openai.APIConnectionError:
        return Check.fail(NAME, f"{where}: could not connect",
                          "start the transcription server, or correct media.transcription.base_url")  # fmt: skip
    finally:
        await transcriber.aclose()
    if config.model in listed:
        return Check.ok(NAME, f"{where} answers and lists the model (asked for its model list; no audio was sent)")
    return Check.ok(NAME, f"{where} answers, but lists {len(listed)} other models and not this one "
                          "(a local server may load it on first use; else check media.transcription.model)")  # fmt: skip


def _refused(status: int, where: str, loaded: LoadedConfig) -> Check:
    if status in (401, 403):
        variable = loaded.variable_for("media.transcription.api_key")
        key = f"{variable} ({loaded.home / '.env'} or the environment) or " if variable else ""
        return Check.fail(NAME, f"{where} refused the key ({status})",
                          f"set a valid key in {key}media.transcription.api_key")  # fmt: skip
    if status in (404, 405):
        return Check.skip(NAME, f"{where} answers but has no model list ({status}), so it was not checked further")
    return Check.fail(NAME, f"{where} answered {status} to a model list request",
                      "the transcription service has trouble: retry in a few minutes, or look at its logs")  # fmt: skip
