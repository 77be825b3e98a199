"""Authentication for HTTP connectors: none, bearer, API-key header, basic, and AWS SigV4.

Settings (`auth` of an http/agui agent), values usually env references such as {"env": "TOKEN"}:

- `{"type": "bearer", "token": ...}`
- `{"type": "api_key", "header": "x-api-key", "value": ...}`
- `{"type": "basic", "username": ..., "password": ...}`
- `{"type": "sigv4", "region": "us-east-1", "service": "execute-api" | "lambda",
   "access_key_id": ..., "secret_access_key": ..., "session_token": ...}`; without keys the
  standard AWS credential chain (environment, profile, instance role) is used.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.config.secrets import SecretSet
from agent_health.errors import ConfigError
from agent_health.lazy import deferred

# botocore loads for the first SigV4-signed request
if TYPE_CHECKING:
    import botocore.auth as botocore_auth
    import botocore.awsrequest as botocore_awsrequest
    import botocore.credentials as botocore_credentials
    import botocore.session as botocore_session
else:
    botocore_session = deferred("botocore.session")  # only agents behind SigV4 pay for botocore
    botocore_credentials = deferred("botocore.credentials")
    botocore_auth = deferred("botocore.auth")
    botocore_awsrequest = deferred("botocore.awsrequest")


class AuthSettings(BaseModel):
    """How requests to the agent authenticate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["none", "bearer", "api_key", "basic", "sigv4"] = Field("none", description="Auth scheme.")
    token: str | None = Field(None, description="bearer: the token.")
    header: str = Field("x-api-key", description="api_key: header that carries the key.")
    value: str | None = Field(None, description="api_key: the key.")
    username: str | None = Field(None, description="basic: user name.")
    password: str | None = Field(None, description="basic: password.")
    region: str | None = Field(None, description="sigv4: AWS region.")
    service: str = Field("execute-api", description="sigv4: signing service (execute-api, lambda, ...).")
    access_key_id: str | None = Field(None, description="sigv4: access key id (else the AWS chain).")
    secret_access_key: str | None = Field(None, description="sigv4: secret access key.")
    session_token: str | None = Field(None, description="sigv4: session token.")
    profile: str | None = Field(None, description="sigv4: AWS profile for the credential chain.")


class Authenticator:
    """Adds credentials to one outgoing request; registers every credential as a secret."""

    def __init__(self, settings: AuthSettings, secrets: SecretSet, setting: str):
        self.settings = s = settings
        self._static: dict[str, str] = {}
        self._credentials: Any = None
        need = {"bearer": ["token"], "api_key": ["value"], "basic": ["username", "password"], "sigv4": ["region"]}.get(
            s.type, []
        )
        for name in need:
            if not getattr(s, name):
                raise ConfigError(f"setting {setting}.{name} is required for auth type {s.type!r}")
        if s.type == "bearer":
            self._static["authorization"] = f"Bearer {s.token}"
        elif s.type == "api_key":
            self._static[s.header] = str(s.value)
        elif s.type == "basic":
            raw = base64.b64encode(f"{s.username}:{s.password}".encode()).decode()
            self._static["authorization"] = f"Basic {raw}"
            secrets.add(s.password)
        for v in (s.token, s.value, s.secret_access_key, s.session_token, *self._static.values()):
            secrets.add(v)
        if s.type == "basic":
            secrets.add(self._static["authorization"].split(" ", 1)[1])
        if s.type == "sigv4":
            self._credentials = self._aws_credentials(setting)
            if self._credentials is not None:
                frozen = self._credentials.get_frozen_credentials()
                secrets.add(frozen.secret_key)
                secrets.add(frozen.token)

    def _aws_credentials(self, setting: str) -> Any:

        s = self.settings
        if s.access_key_id and s.secret_access_key:
            return botocore_credentials.Credentials(s.access_key_id, s.secret_access_key, s.session_token)
        creds = botocore_session.Session(profile=s.profile).get_credentials()
        if creds is None:
            raise ConfigError(
                f"setting {setting}: sigv4 needs access_key_id/secret_access_key or AWS "
                "credentials in the environment or a profile"
            )
        return creds

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """Headers with credentials added; SigV4 signs the exact method, URL, headers and body."""
        if self.settings.type == "none":
            return headers
        if self.settings.type != "sigv4":
            return {**headers, **self._static}
        # Only the headers the agent will see are signed; hop-by-hop ones would break verification.
        aws = botocore_awsrequest.AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        botocore_auth.SigV4Auth(
            self._credentials.get_frozen_credentials(), self.settings.service, str(self.settings.region)
        ).add_auth(aws)
        return dict(aws.headers.items())
