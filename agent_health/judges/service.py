"""The judge service: picks a provider per run, test or call, applies skip mode, the cache and the
judge concurrency limit, and turns every failure into an errored verdict, so `judge()` never raises.
Every verdict it returns (cached ones too) names the judge that gave it (`Verdict.identity`).

Routing, for one request:
1. `evaluator="name"` runs the custom evaluator `name` from the configuration (rubrics included),
   with an `llm` helper bound to the judge model chosen below.
2. The judge model is the call's `model=`, else the first `per_test` glob matching the test id,
   else the run's `judge.model` (with `judge.provider`). `provider:model` picks a provider
   (`openai`, `bedrock`, `demo`, a kind an installed package registers, or a name from
   `judge.providers`); a bare id uses the default one. Kinds live in judges/registry.py.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_health.backends import is_shared
from agent_health.errors import ConfigError
from agent_health.judges.base import JudgeProvider
from agent_health.judges.cache import JudgeCache, LocalJudgeCache, open_judge_cache
from agent_health.judges.chat import Backoff, ChatClient
from agent_health.judges.demo import DemoJudge
from agent_health.judges.identity import (
    IN_PROCESS,
    custom_identity,
    definition_hash,
    fallback_identity,
    named_definition,
)
from agent_health.judges.kit import JudgeContext, run_judge
from agent_health.judges.llm import CachedLLM
from agent_health.judges.prompt import PromptLimits
from agent_health.judges.registry import REGISTRY
from agent_health.lazy import deferred
from agent_health.model import JudgeIdentity, Verdict
from agent_health.model.judge import JudgeRequest
from agent_health.model.settings import StoreSettings
from agent_health.spend import SpendRefused, metering, reset_meter

# the LLM judge and custom evaluators load when a request is first routed to them
if TYPE_CHECKING:  # pragma: no cover
    import agent_health.judges.custom as custom
    import agent_health.judges.llm_judge as llm_judge
    from agent_health.config.model import JudgeSettings
else:
    custom = deferred("agent_health.judges.custom")
    llm_judge = deferred("agent_health.judges.llm_judge")


ProviderFactory = Callable[[JudgeRequest], JudgeProvider]
# A judge identity -> None when it may gate, else why not (the `judge.calibration` gate).
CalibrationCheck = Callable[[JudgeIdentity], str | None]
# the built-in kinds, which `judge(..., evaluator=...)` may name (before any custom evaluator)
BUILTIN_PROVIDERS = tuple(REGISTRY.builtins)


def _refusal(identity: JudgeIdentity, request: JudgeRequest, reason: str) -> str:
    where = f" in test {request.test_id}" if request.test_id else ""
    return f"judge {identity.label} is not calibrated{where}: {reason}; --require-calibrated refuses its verdicts"


class JudgeService:
    """Shared by the tests of one engine run."""

    def __init__(
        self,
        provider: JudgeProvider | None = None,
        *,
        skip: bool = False,
        concurrency: int = 8,
        select: ProviderFactory | None = None,
        settings: JudgeSettings | None = None,
        evaluators: Mapping[str, Callable[..., Any]] | None = None,
        cache: JudgeCache | Path | None = None,
    ):
        self.provider = provider or DemoJudge()
        self.skip = skip
        self._select = select
        self.settings = settings
        self.evaluators = dict(evaluators or {})
        # A path opens lazily, so runs that only use the demo judge never create the cache file.
        self._cache: JudgeCache | None = cache if isinstance(cache, JudgeCache) else None
        self._cache_path = Path(cache) if isinstance(cache, (str, Path)) else None
        self._limit = asyncio.Semaphore(max(1, concurrency))
        self._clients: dict[tuple[str, str], ChatClient] = {}
        self._no_structured: set[str] = set()  # providers that rejected structured outputs this run
        self._judges: dict[tuple[str, str], JudgeProvider] = {}
        self._definitions: dict[str, str] = {}  # custom evaluator -> hash of its definition
        self.settings_hash = ""  # hash of the judge settings it was built from (results' provenance)
        # The calibration gate (session wiring sets it from judge.calibration and the store): a
        # gating verdict of a judge it refuses is demoted to observe, or errored when required.
        self.calibration: CalibrationCheck | None = None
        self.require_calibrated = False
        self.uncalibrated: dict[str, str] = {}  # judge label -> why it was refused, for warnings
        if settings is not None and not skip:
            # fail fast on a missing model or key, naming the setting (skip mode needs no credentials)
            self.resolve(settings.model)

    @classmethod
    def from_settings(
        cls,
        settings: JudgeSettings,
        *,
        state_path: Path | None = None,
        skip: bool = False,
        no_cache: bool = False,
        evaluators: Mapping[str, Callable[..., Any]] | None = None,
        store: StoreSettings | None = None,
    ) -> JudgeService:
        """Build from `JudgeSettings`; the cache lives in `state_path/settings.cache_file`, or on
        the result store's backend when `store` is a shared one (see judges/cache.py)."""
        cache: JudgeCache | Path | None = None
        if settings.cache and not no_cache and not skip and state_path is not None:
            cache = Path(state_path) / settings.cache_file
            if is_shared(store):  # connects on first use, like the SQLite file opens on first use
                cache = open_judge_cache(store, cache)
        return cls(skip=skip, concurrency=settings.concurrency, settings=settings, evaluators=evaluators, cache=cache)

    @property
    def cache(self) -> JudgeCache | None:
        """The persistent cache (opened on first use), or None when caching is off."""
        if self._cache is None and self._cache_path is not None:
            self._cache = LocalJudgeCache(self._cache_path)
        return self._cache

    # -- provider selection ----------------------------------------------------------
    def model_for(self, request: JudgeRequest) -> str | None:
        """The judge model spec for this request: call, then per-test glob, then the run's."""
        if request.model:
            return request.model
        if self.settings is not None:
            if request.test_id:
                for pattern, spec in self.settings.per_test.items():
                    if fnmatch.fnmatchcase(request.test_id, pattern):
                        return spec
            return self.settings.model
        return None

    def _names(self, name: str) -> bool:
        """Whether `name` is a provider: one from judge.providers, or a registered kind."""
        s = self.settings
        assert s is not None
        return name in s.providers or name in REGISTRY

    def _split(self, spec: str | None) -> tuple[str, str, str | None, dict[str, Any]]:
        """(provider name, provider kind, model, settings) for a model spec."""
        s = self.settings
        assert s is not None
        name, model = s.provider, spec
        if spec:
            head, sep, rest = spec.partition(":")
            if sep and self._names(head):
                name, model = head, rest or None
            elif self._names(spec):
                name, model = spec, None
        if name in s.providers:
            conf = dict(s.providers[name])
            kind = str(conf.pop("type", name))
            model = model or conf.pop("model", None)
            conf.pop("model", None)
        elif name == s.provider and name in REGISTRY:
            kind, conf = name, dict(s.settings)
            model = model or s.model
        elif name in REGISTRY:
            kind, conf = name, {}
        else:
            raise ConfigError(
                f"judge provider {name!r} unknown; use one of {REGISTRY.kinds()} "
                f"or a name from judge.providers {sorted(s.providers)}"
            )
        if kind not in REGISTRY:
            raise ConfigError(f"judge provider {name!r} has type {kind!r}; use one of {REGISTRY.kinds()}")
        return name, kind, model, conf

    def _kind_class(self, kind: str) -> type[ChatClient] | type[JudgeProvider]:
        """The class a kind names: an LLM chat client, or a provider that gives verdicts itself."""
        cls = REGISTRY.load(kind, f"judge provider {kind!r}")
        if isinstance(cls, type) and issubclass(cls, (ChatClient, JudgeProvider)):
            return cls
        raise ConfigError(
            f"judge provider {kind!r} ({REGISTRY.target(kind)}) is neither a "
            "agent_health.judges.chat.ChatClient nor a agent_health.judges.base.JudgeProvider subclass"
        )

    def provider_model(self, spec: str | None) -> tuple[str, str | None]:
        """(provider type, model id) a model spec resolves to; ConfigError when it cannot."""
        _, kind, model, _ = self._split(spec)
        return kind, model

    def client(self, spec: str | None) -> ChatClient | None:
        """The chat client for a model spec (None for the demo provider and for providers that
        give verdicts themselves)."""
        name, kind, model, conf = self._split(spec)
        if kind == "demo":
            return None
        cls = self._kind_class(kind)
        if not issubclass(cls, ChatClient):
            return None
        if not model:  # an LLM needs one; a provider that gives verdicts itself may not
            raise ConfigError(f"judge provider {name!r} needs a model (judge.model, or model='{name}:<model id>')")
        key = (kind, f"{model}|{sorted(conf.items())!r}")
        if key not in self._clients:
            s = self.settings
            assert s is not None
            backoff = Backoff(max_retries=s.max_retries, base_s=s.backoff_s, max_s=s.backoff_max_s)
            self._clients[key] = cls(model, conf, backoff, no_structured=self._no_structured)
        return self._clients[key]

    def resolve(self, spec: str | None) -> JudgeProvider:
        """The judge provider for a model spec (the demo judge, or an LLM judge)."""
        if self.settings is None:
            return self.provider
        client = self.client(spec)
        if client is None:
            _, kind, model, conf = self._split(spec)
            if kind == "demo":
                return self.provider
            own = (kind, f"{model}|{sorted(conf.items())!r}")  # a provider that gives verdicts itself
            if own not in self._judges:
                cls = self._kind_class(kind)
                assert issubclass(cls, JudgeProvider)  # client() returned None: not a chat client
                self._judges[own] = cls(model, conf)  # type: ignore[call-arg]
            return self._judges[own]
        key = (client.provider, str(id(client)))
        if key not in self._judges:
            s = self.settings
            limits = PromptLimits(
                max_output_chars=s.max_output_chars,
                max_step_chars=s.max_step_chars,
                max_steps=s.max_steps,
                max_trace_chars=s.max_trace_chars,
            )
            self._judges[key] = llm_judge.LLMJudge(
                client, limits=limits, max_tool_steps=s.max_tool_steps, cache=self.cache
            )
        return self._judges[key]

    def llm(self, model: str | None = None) -> CachedLLM:
        """The cached `llm` helper for a model spec (custom evaluators, the insight synthesizer)."""
        spec = model or (self.settings.model if self.settings else None)
        client = self.client(spec) if self.settings is not None else None
        what = "the offline demo heuristic"
        if client is None and self.settings is not None and (kind := self._split(spec)[1]) != "demo":
            what = f"{kind!r}, which gives verdicts itself and has no model to ask"
        return CachedLLM(
            client,
            self.cache if client is not None else None,
            unavailable=f"the judge provider is {what}; configure judge=... with an LLM provider's model "
            "(openai, bedrock, or an installed package's)",
        )

    # -- judging ------------------------------------------------------------------
    async def judge(self, request: JudgeRequest, *, skip: bool = False) -> Verdict:
        """One verdict; never raises."""
        if self.skip or skip:
            return Verdict(
                passed=True,
                score=None,
                skipped=True,
                criteria=request.criteria,
                role=request.role,
                reasoning="judge skipped (skip mode)",
                evaluator="skipped",
            )
        who = request.evaluator or request.model or "judge"
        described = None  # who was asked, so an errored verdict names its judge too
        meter, metering_token = metering()  # what the calls cost, should the verdict be errored
        try:
            async with self._limit:
                kind = request.evaluator is not None and self._evaluator_is_kind(request.evaluator)
                if request.judge is not None:
                    who = getattr(request.judge, "judge_name", "judge")
                    verdict = await self._named(request)
                elif request.evaluator is not None and not kind:
                    verdict = await self._custom(request)
                else:
                    spec = request.evaluator if kind and not request.model else self.model_for(request)
                    provider = self._select(request) if self._select else self.resolve(spec)
                    who = provider.name or type(provider).__name__
                    described = provider.describe(request)
                    if described is not None and (refused := self._refuse_early(request, described)):
                        return refused  # --require-calibrated: the judge is never called
                    verdict = await provider.evaluate(request)
                    if verdict.identity is None:  # a provider that does not describe itself
                        verdict = verdict.model_copy(update={"identity": fallback_identity(request, who, verdict)})
        except SpendRefused as exc:  # the call was not made: its estimate passes the budget or the cap
            return _errored(
                request,
                f"not judged: {exc}",
                evaluator="budget" if exc.budget else "cost cap",
                identity=described or fallback_identity(request, str(who)),
                usage=meter.total,  # calls made before the refused one (an agentic judge's loop) were paid
            )
        except Exception as exc:  # provider failure: errored, never a silent pass or zero  # noqa: BLE001
            where = f" in test {request.test_id}" if request.test_id else ""
            return _errored(
                request,
                f"{who} judge failed{where}: {type(exc).__name__}: {exc}",
                evaluator=str(who),
                identity=described or fallback_identity(request, str(who)),
                usage=meter.total,  # an answer unusable after its repair still cost both calls
            )
        finally:
            reset_meter(metering_token)
        if verdict.role != request.role:
            verdict = verdict.model_copy(update={"role": request.role})
        deterministic = (
            request.judge is not None and verdict.identity is not None and verdict.identity.provider == IN_PROCESS
        )
        if (
            request.role == "gate"
            and self.calibration is not None
            and verdict.identity is not None
            and not deterministic
        ):
            # a named judge that asked no model is a deterministic check: nothing to calibrate
            verdict = self._gate(verdict, verdict.identity, request)
        return verdict

    def _evaluator_is_kind(self, evaluator: str) -> bool:
        """Whether `judge(..., evaluator=...)` names a provider kind: a built-in kind wins over a
        custom evaluator of the same name, which wins over an installed package's kind."""
        return evaluator in BUILTIN_PROVIDERS or (evaluator not in self.evaluators and evaluator in REGISTRY)

    def _refuse_early(self, request: JudgeRequest, identity: JudgeIdentity) -> Verdict | None:
        """Under --require-calibrated, the errored verdict of a gating judge known (before it is
        asked) to miss the gate; None otherwise."""
        if not self.require_calibrated or request.role != "gate" or self.calibration is None:
            return None
        reason = self.calibration(identity)
        if reason is None:
            return None
        self.uncalibrated.setdefault(identity.label, reason)
        return _errored(
            request,
            _refusal(identity, request, reason),
            evaluator=identity.evaluator,
            identity=identity,
            model=identity.model,
            calibration=reason,
        )

    def _gate(self, verdict: Verdict, identity: JudgeIdentity, request: JudgeRequest) -> Verdict:
        """The calibration gate: a verdict of an uncalibrated judge observes (or errors)."""
        assert self.calibration is not None
        reason = self.calibration(identity)
        if reason is None:
            return verdict.model_copy(update={"calibrated": True})
        self.uncalibrated.setdefault(identity.label, reason)
        if self.require_calibrated:
            return verdict.model_copy(
                update={
                    "passed": False,
                    "errored": True,
                    "error": _refusal(identity, request, reason),
                    "calibration": reason,
                }
            )
        return verdict.model_copy(update={"role": "observe", "calibration": reason})

    async def _ask(self, request: JudgeRequest) -> Verdict:
        """The judge model's verdict on `request` (the provider path of `judge()`: fences, nonce, cache)."""
        provider = self._select(request) if self._select else self.resolve(self.model_for(request))
        described = provider.describe(request)
        if described is not None and (refused := self._refuse_early(request, described)):
            return refused
        verdict = await provider.evaluate(request)
        if verdict.identity is None:
            who = provider.name or type(provider).__name__
            verdict = verdict.model_copy(update={"identity": fallback_identity(request, who, verdict)})
        return verdict

    async def _named(self, request: JudgeRequest) -> Verdict:
        """A named judge (judges/kit.py): deterministic ones ask no model; the others ask it through
        `_ask` or the cached `llm` helper. Its identity names the judge and hashes its configuration."""
        named = request.judge
        asked: list[JudgeIdentity] = []

        async def ask(criteria: str, model: str | None, claim: str | None) -> Verdict:
            options = {**request.options, "demo_claim": claim} if claim else request.options
            update = {"criteria": criteria, "judge": None, "model": model or request.model, "options": options}
            sub = request.model_copy(update=update)
            verdict = await self._ask(sub)
            if verdict.identity is not None:
                asked.append(verdict.identity)
            return verdict

        ctx = JudgeContext(
            request=request, ask_model=ask, make_llm=lambda: self.llm(self.model_for(request)), subject=request.subject
        )
        verdict = await run_judge(named, ctx)
        definition = named_definition(named)
        if asked:  # the model that answered, named as this judge
            identity = asked[-1].model_copy(update={"evaluator": named.judge_name, "definition_hash": definition})
        else:
            llm = ctx._llm
            identity = custom_identity(
                named.judge_name,
                type(named).assess,
                definition=definition,
                llm_client=llm.client if llm is not None else None,
                cache_keys=tuple(llm.keys) if llm is not None else (),
            )
        return verdict.model_copy(update={"identity": identity})

    async def _custom(self, request: JudgeRequest) -> Verdict:
        name = str(request.evaluator)
        fn = self.evaluators.get(name)
        if fn is None:
            known = sorted(self.evaluators) + REGISTRY.kinds()
            raise ConfigError(f"evaluator {name!r} is not configured; known: {', '.join(known)}")
        llm = self.llm(self.model_for(request))
        verdict = await custom.run_custom(name, fn, request, llm)
        if name not in self._definitions:
            self._definitions[name] = definition_hash(fn)
        identity = custom_identity(
            name, fn, definition=self._definitions[name], llm_client=llm.client, cache_keys=tuple(llm.keys)
        )
        return verdict.model_copy(update={"identity": identity})

    async def aclose(self) -> None:
        await self.provider.aclose()
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        self._judges.clear()
        if self._cache is not None:
            self._cache.close()
            self._cache = None


def _errored(request: JudgeRequest, error: str, *, evaluator: str, identity: JudgeIdentity, **more: Any) -> Verdict:
    """A verdict that could not be reached (the judge failed, or was refused before a call): errored,
    never a silent pass."""
    return Verdict(
        passed=False,
        errored=True,
        criteria=request.criteria,
        role=request.role,
        error=error,
        evaluator=evaluator,
        identity=identity,
        **more,
    )
