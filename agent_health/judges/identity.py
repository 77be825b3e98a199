"""Judge identities: who gave a verdict (provider, model, evaluator, the hash of its definition,
the prompt template version, cache keys), recorded on every verdict the judge service returns."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agent_health.config.fingerprints import digest
from agent_health.judges.chat import ChatClient
from agent_health.judges.prompt import PROMPT_VERSION
from agent_health.judges.rubric import Rubric
from agent_health.model import JudgeIdentity, JudgeRequest, Verdict

IN_PROCESS = "python"  # the provider of a custom evaluator that asked no model


def client_identity(client: ChatClient, **fields: Any) -> JudgeIdentity:
    """The identity of a verdict a chat client's model gave."""
    return JudgeIdentity(provider=client.provider, model=client.model, endpoint=client.identity or None, **fields)


def definition_hash(fn: Callable[..., Any]) -> str:
    """Hash of a custom evaluator's definition: a rubric's whole content (instructions, metrics,
    scales, threshold, limits); a function's source when Python can read it, else its qualified
    name (a callable object without source, a builtin)."""
    if isinstance(fn, Rubric):
        return digest(fn.model_dump(mode="json"))
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn)
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):
        text = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"
    return digest({"source": text})


def named_definition(judge: Any) -> str:
    """Hash of a named judge's definition: its class's source (a `create_judge` function's) and its options."""
    fn = getattr(type(judge), "fn", None) or type(judge)
    return digest({"code": definition_hash(fn), "options": repr(judge.options())})


def custom_identity(
    name: str, fn: Callable[..., Any], *, definition: str, llm_client: ChatClient | None, cache_keys: tuple[str, ...]
) -> JudgeIdentity:
    """A custom evaluator's or rubric's verdict: the model its `llm` helper asked, if it asked one."""
    kind = "rubric" if isinstance(fn, Rubric) else "custom"
    fields: dict[str, Any] = {
        "evaluator": name,
        "kind": kind,
        "definition_hash": definition,
        "prompt_version": PROMPT_VERSION if kind == "rubric" else None,
        "cache_keys": cache_keys,
    }
    if llm_client is not None and cache_keys:
        return client_identity(llm_client, **fields)
    return JudgeIdentity(provider=IN_PROCESS, **fields)


def fallback_identity(request: JudgeRequest, who: str, verdict: Verdict | None = None) -> JudgeIdentity:
    """What is known of a judge that did not describe itself (a provider plugged in by a test, or one
    that failed before answering)."""
    model = verdict.model if verdict is not None else request.model
    return JudgeIdentity(
        provider=who,
        model=model,
        evaluator=(verdict.evaluator if verdict is not None else None) or request.evaluator or who,
        kind="llm" if model else "custom",
    )
