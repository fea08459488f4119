"""An OpenAI-compatible endpoint as the chat model of an eval (``--model openai --base-url URL``).

:func:`openai_chat_model` checks the endpoint (``GET {base_url}/models``) and wraps it in
LangChain's ``ChatOpenAI`` (the ``eval`` extra). The API key is ``$UNSEE_OPENAI_API_KEY``,
else ``$OPENAI_API_KEY``, else the placeholder ``"unsee-local"`` (local servers, such as
``python -m unsee.openai_server``, ignore it); it never appears in an error message.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import openai

from unsee.middleware.errors import InvalidArgument

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

PLACEHOLDER_KEY = "unsee-local"


class EndpointUnreachable(InvalidArgument):
    """The endpoint did not answer ``GET /models`` with a model list; the message names the URL and why.
    (An ``InvalidArgument`` for callers that catch it; at the command line an environment problem.)"""

    exit_code = 3


def api_key() -> str:
    """``$UNSEE_OPENAI_API_KEY`` > ``$OPENAI_API_KEY`` > :data:`PLACEHOLDER_KEY`."""
    return os.environ.get("UNSEE_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY


def openai_chat_model(base_url: str, *, model: str | None = None, max_tokens: int = 48,
                      temperature: float = 0.0, seed: int | None = None, timeout: float = 30.0,
                      check: bool = True) -> "BaseChatModel":
    """A ``ChatOpenAI`` on ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``), Chat Completions API.

    First lists the endpoint's models (timeout ``min(timeout, 10)`` s, no retry): a URL that is
    not http(s), a refused or timed-out connection, a non-2xx answer or an empty list raise
    :class:`EndpointUnreachable`. ``model=None`` takes the first listed id; ``check=False`` with
    a ``model`` skips the listing (an endpoint already checked). Each call then has
    ``timeout`` seconds and one retry; ``seed`` is sent as the request's ``seed`` (servers
    may ignore it). The key is :func:`api_key` (a placeholder when no variable is set).
    """
    key = api_key()
    if check or model is None:
        model = model or _listed_models(base_url, key, min(timeout, 10))[0]
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=base_url, model=model, api_key=key, max_tokens=max_tokens,
                      temperature=temperature, seed=seed, timeout=timeout, max_retries=1,
                      use_responses_api=False)


def _listed_models(base_url: str, key: str, timeout: float) -> list[str]:
    """The ids ``GET {base_url}/models`` lists (at least one), else :class:`EndpointUnreachable`."""

    def unreachable(cause: object) -> EndpointUnreachable:
        why = str(cause).replace(key, "***") if key != PLACEHOLDER_KEY else str(cause)
        return EndpointUnreachable(f"OpenAI-compatible endpoint {base_url!r} unreachable: {why}")

    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise unreachable("not an http(s) URL")
    try:
        client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        ids = [m.id for m in client.models.list().data]
    except openai.APIStatusError as e:
        raise unreachable(f"GET /models answered HTTP {e.status_code}") from None
    except openai.OpenAIError as e:  # refused, timed out, bad URL
        cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
        raise unreachable(f"{type(e).__name__}: {e}{cause}") from None
    except (ValueError, AttributeError, TypeError):  # a 2xx answer that is no JSON model list
        raise unreachable("GET /models did not answer with a model list") from None
    if not ids:
        raise unreachable("it lists no models")
    return ids


__all__ = ["EndpointUnreachable", "PLACEHOLDER_KEY", "api_key", "openai_chat_model"]
