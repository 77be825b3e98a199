"""The `bedrock` judge provider: AWS Bedrock Runtime Converse API through boto3.

boto3 is imported only when a Bedrock judge is actually built (the CLI must not pay for it).
Credentials come from the standard AWS chain (environment, profile, instance role); nothing secret
lives in the configuration. Settings: `region` (default $AWS_REGION or us-east-1), `profile`,
`endpoint_url` (VPC endpoints, tests), `inference_config` (Converse inferenceConfig, default
{"temperature": 0, "maxTokens": 1024}), `timeout_s` (60).

botocore's own retries are turned off so throttling goes through the same backoff as every other
provider (counted in `usage.retries`).

Structured verdicts use tool use: the answer schema is offered as a tool the model must call
(`toolChoice`), and the tool's input is the answer. A model that rejects it (a ValidationException,
as models without tool use or forced tool choice answer) is asked again without, once, and
remembered for the rest of the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError

from agent_health.config.secrets import register_credentials
from agent_health.judges.chat import (
    AnswerSchema,
    ChatClient,
    ChatMessage,
    ChatResponse,
    ProviderError,
    RateLimited,
    StructuredOutputRejected,
    ToolCall,
    ToolSpec,
)
from agent_health.model import Usage

# stopReason of an answer stopped at maxTokens, or at the model's context window
CUT_OFF = ("max_tokens", "model_context_window_exceeded")
_THROTTLED = {
    "ThrottlingException",
    "TooManyRequestsException",
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "ServiceQuotaExceededException",
}


class BedrockChat(ChatClient):
    """Converse calls run in a worker thread (boto3 is blocking; its clients are thread-safe)."""

    provider = "bedrock"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        s = self.settings
        self.region = (
            s.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        )
        self.profile = s.get("profile")
        self.endpoint_url = s.get("endpoint_url")
        self.inference_config = dict(s.get("inference_config") or {"temperature": 0, "maxTokens": 1024})
        self.timeout_s = float(s.get("timeout_s", 60.0))
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return f"bedrock:{self.model} ({self.region})"

    @property
    def max_output_tokens(self) -> int | None:
        value = self.inference_config.get("maxTokens")
        return int(value) if value else None

    def _boto(self) -> Any:
        with self._lock:
            if self._client is None:
                session = boto3.session.Session(profile_name=self.profile) if self.profile else boto3.session.Session()
                register_credentials(session.get_credentials())
                self._client = session.client(
                    "bedrock-runtime",
                    region_name=self.region,
                    endpoint_url=self.endpoint_url,
                    config=BotoConfig(
                        retries={"total_max_attempts": 1, "mode": "standard"},
                        read_timeout=self.timeout_s,
                        connect_timeout=min(self.timeout_s, 10.0),
                    ),
                )
            return self._client

    def request(
        self,
        messages: list[ChatMessage],
        system: str | None,
        tools: tuple[ToolSpec, ...],
        schema: AnswerSchema | None = None,
    ) -> dict[str, Any]:
        """The Converse keyword arguments. With `schema`, the answer is a tool the model must call
        (among the other tools, when there are any)."""
        wire: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "tool":
                block = {
                    "toolResult": {
                        "toolUseId": m.tool_call_id,
                        "content": [{"text": m.content}],
                        "status": "error" if m.is_error else "success",
                    }
                }
                if wire and wire[-1]["role"] == "user" and "toolResult" in wire[-1]["content"][0]:
                    wire[-1]["content"].append(block)  # Converse wants all results of one turn together
                else:
                    wire.append({"role": "user", "content": [block]})
            elif m.role == "assistant":
                content: list[dict[str, Any]] = [{"text": m.content}] if m.content else []
                content += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.args}} for c in m.tool_calls]
                wire.append({"role": "assistant", "content": content})
            else:
                wire.append({"role": "user", "content": [{"text": m.content}]})
        kwargs: dict[str, Any] = {"modelId": self.model, "messages": wire, "inferenceConfig": self.inference_config}
        if system:
            kwargs["system"] = [{"text": system}]
        specs = [
            {"toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.parameters}}}
            for t in tools
        ]
        if schema is not None:
            specs.append(
                {
                    "toolSpec": {
                        "name": schema.name,
                        "description": schema.description or f"Submit your {schema.name}.",
                        "inputSchema": {"json": dict(schema.schema)},
                    }
                }
            )
        if specs:
            kwargs["toolConfig"] = {"tools": specs}
            if schema is not None:
                kwargs["toolConfig"]["toolChoice"] = {"any": {}} if tools else {"tool": {"name": schema.name}}
        return kwargs

    async def _call(
        self,
        messages: list[ChatMessage],
        *,
        system: str | None,
        tools: tuple[ToolSpec, ...],
        json_mode: bool,
        schema: AnswerSchema | None,
    ) -> ChatResponse:
        kwargs = self.request(messages, system, tools, schema)
        try:
            data = await asyncio.to_thread(lambda: self._boto().converse(**kwargs))
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code, message = err.get("Code", "?"), err.get("Message", str(exc))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _THROTTLED or status in (429, 503):
                retry_after = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("retry-after")
                raise RateLimited(f"{code}: {message}", float(retry_after) if retry_after else None) from exc
            if code == "ValidationException" and schema is not None:
                raise StructuredOutputRejected(f"{self.label}: {code}: {message}") from exc
            raise ProviderError(f"{self.label}: {code}: {message}") from exc
        except BotoCoreError as exc:
            raise ProviderError(f"{self.label}: {type(exc).__name__}: {exc}") from exc
        texts, calls = [], []
        answer: str | None = None
        for block in ((data.get("output") or {}).get("message") or {}).get("content") or []:
            if "text" in block:
                texts.append(block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                args = use.get("input")
                if schema is not None and use.get("name") == schema.name:
                    answer = json.dumps(args)  # the structured answer; not a tool to run
                    continue
                calls.append(
                    ToolCall(
                        id=str(use.get("toolUseId")),
                        name=str(use.get("name")),
                        args=args if isinstance(args, dict) else {"value": args},
                    )
                )
        usage = data.get("usage") or {}
        stop = data.get("stopReason")
        return ChatResponse(
            text=answer if answer is not None else "\n".join(texts),
            tool_calls=tuple(calls),
            model=self.model,
            cut_off=f'stopReason "{stop}"' if stop in CUT_OFF else "",
            usage=Usage.of(
                int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0), model=self.model, llm_calls=1
            ),
        )
