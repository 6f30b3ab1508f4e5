"""Sending the configured model a one-token request through the gateway's own provider code."""

from __future__ import annotations

from typing import Final

from agent import ChatMessage, ErrorKind, ModelRequest, ProviderError, make_provider
from config import LoadedConfig
from gateway.operations.doctor.results import Check

MAX_WAIT: Final = 30.0
"""Seconds the one-token request may take (less than model.timeout when that is longer)."""


async def model_check(loaded: LoadedConfig) -> Check:
    model = loaded.settings.model
    endpoint = model.base_url or f"the {model.provider} API"
    provider = make_provider(model.provider, api_key=model.api_key, base_url=model.base_url,
                             timeout=min(model.timeout, MAX_WAIT))  # fmt: skip
    request = ModelRequest(model=model.name, system="", messages=[ChatMessage.user("Say ok.")], max_tokens=1)
    try:
        response = await provider.complete(request)
    except ProviderError as error:
        return Check.fail("model", f"{model.provider} {model.name} at {endpoint}: {_what(error)}", _fix(error, loaded))
    finally:
        await provider.aclose()
    used = response.usage.input_tokens + response.usage.cache_read_tokens
    return Check.ok("model", f"{model.provider} {model.name} at {endpoint} answered a one-token request ({used} tokens in)")


def _what(error: ProviderError) -> str:
    status = f" ({error.status})" if error.status else ""
    return f"{error.kind.value.replace('_', ' ')}{status}: {error.args[0]}"


def _fix(error: ProviderError, loaded: LoadedConfig) -> str:
    variable = loaded.variable_for("model.api_key")
    key = f"{variable} (environment or {loaded.home / '.env'}) or model.api_key" if variable else "model.api_key"
    fixes = {
        ErrorKind.AUTH: f"the key was refused: set a valid key in {key}",
        ErrorKind.NOT_FOUND: "the endpoint does not know this model: check model.name (and model.base_url)",
        ErrorKind.CONNECTION: "check the network, any proxy, and model.base_url",
        ErrorKind.TIMEOUT: "the endpoint is slow or unreachable: check the network and model.base_url, then retry",
        ErrorKind.RATE_LIMIT: "the account is rate limited or out of credit: wait, or check its plan and billing",
        ErrorKind.BAD_REQUEST: "the endpoint refused the request: check model.name and model.provider",
    }
    return fixes.get(error.kind, "the provider has trouble right now: retry in a few minutes")
