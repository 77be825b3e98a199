"""Finding the configuration: `--config`, then $AGENT_HEALTH_CONFIG, then `agent_health_config.py`
in the current folder or its parents. Without one, the embedded defaults apply."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from agent_health.config.deployment import deployment_variable
from agent_health.config.model import Config
from agent_health.errors import ConfigError

CONFIG_FILE = "agent_health_config.py"
CONFIG_ENV = deployment_variable("config_path")


def find_config(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path | None:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"configuration file {path} does not exist (--config)")
        return path.resolve()
    env = os.environ.get(CONFIG_ENV)
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"configuration file {path} does not exist (${CONFIG_ENV})")
        return path.resolve()
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Config:
    """Load the project configuration, or the embedded defaults rooted at `cwd`."""
    path = find_config(explicit, cwd)
    if path is None:
        return Config(root=str((cwd or Path.cwd()).resolve()))
    spec = importlib.util.spec_from_file_location(f"agent_health_user_config_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except Exception as exc:
        raise ConfigError(f"{path}: failed to load: {type(exc).__name__}: {exc}") from exc
    config = getattr(module, "config", None)
    if not isinstance(config, Config):
        raise ConfigError(f"{path}: define `config = define_config(...)` at module level")
    updates = {"source": str(path)}
    if config.root == ".":
        updates["root"] = str(path.parent)
    located: Config = config.model_copy(update=updates)  # typed: Config's fields base is built at import
    return located
