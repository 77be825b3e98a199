"""What every shared backend's settings obey: no inline secrets, and one `shared` switch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agent_health.errors import ConfigError
from agent_health.model.settings import StoreSettings, names_a_secret

SHARED_SETTING = "shared"


def check_no_inline_secrets(value: Any, setting: str) -> None:
    """Raise a ConfigError naming the setting when a credential is written in the settings
    (names ending in `_env` name an environment variable and are fine)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            where = f"{setting}.{key}"
            if names_a_secret(key):
                raise ConfigError(
                    f"{where}: secrets never go in the configuration; name an environment variable "
                    f"instead ({key}_env) or use the AWS credential chain"
                )
            check_no_inline_secrets(inner, where)
    elif isinstance(value, str) and "://" in value and "@" in value:
        try:
            has_password = urlsplit(value).password is not None
        except ValueError:
            has_password = False
        if has_password:
            raise ConfigError(
                f"{setting}: a URL with a password in it; put the password in the environment "
                "(auth.password_env) and leave it out of the URL"
            )


def is_shared(store: StoreSettings | None) -> bool:
    """True when the judge cache and recordings live on the store's backend too: for s3 and
    opensearch stores unless `shared: False` (a local store, or an installed package's, keeps them local)."""
    if store is None or store.type not in ("s3", "opensearch"):
        return False
    return bool(store.settings.get(SHARED_SETTING, True))
