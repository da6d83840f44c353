"""Reading a model config mapping into checked values, with errors that name the key.

Every problem here is a :class:`ModelConfigError` raised when the model is built, so a bad
preset or override fails before any agent starts, with the config key (``model.<key>``) in the
message. Credentials are read from the environment variable the config names, never from the
config itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from sr_dist.models.base import TOOL_MODES, ModelConfigError
from sr_dist.models.retry import RetryPolicy

__all__ = [
    "COMMON_KEYS",
    "as_plain_dict",
    "check_keys",
    "opt_bool",
    "opt_float",
    "opt_int",
    "opt_str",
    "req_str",
    "resolve_api_key",
    "retry_policy",
    "tool_mode",
]

#: Keys every provider accepts (a preset may leave the ones it does not use at ``null``).
COMMON_KEYS = frozenset(
    {
        "provider",
        "model",
        "base_url",
        "api_key_env",
        "tool_mode",
        "temperature",
        "max_tokens",
        "timeout_s",
        "max_retries",
        "retry_base_delay_s",
        "retry_max_delay_s",
        "record_path",
    }
)

#: Keys that must never appear in a config: a secret belongs in the environment.
#: Config keys that would hold a secret: refused in ``model.*`` (keys go in ``api_key_env``).
SECRET_KEYS = ("api_key", "apikey", "key", "token", "auth_token", "password", "secret")
_SECRET_KEYS = SECRET_KEYS


def as_plain_dict(cfg: Any) -> dict[str, Any]:
    """A plain ``dict`` from a mapping or an OmegaConf ``DictConfig`` (interpolations resolved)."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        return {str(k): v for k, v in container.items()}
    if isinstance(cfg, Mapping):
        return {str(k): v for k, v in cfg.items()}
    raise ModelConfigError(f"a model config is a mapping with a 'provider' key, not {type(cfg).__name__}")


def check_keys(cfg: Mapping[str, Any], allowed: frozenset[str], provider: str) -> None:
    """Refuse keys the provider does not know (typos would otherwise be silently ignored)."""
    for key in cfg:
        if key.lower() in _SECRET_KEYS:
            raise ModelConfigError(
                f"model.{key}: secrets do not belong in the config; put the key in an environment "
                f"variable and name it in model.api_key_env"
            )
    unknown = sorted(set(cfg) - allowed)
    if unknown:
        raise ModelConfigError(
            f"unknown key(s) for provider {provider!r}: {', '.join('model.' + k for k in unknown)}; "
            f"known keys: {', '.join(sorted(allowed))}"
        )


def req_str(cfg: Mapping[str, Any], key: str) -> str:
    value = cfg.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ModelConfigError(f"model.{key} is required (a non-empty string), got {value!r}")
    return value


def opt_str(cfg: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise ModelConfigError(f"model.{key} must be a non-empty string or null, got {value!r}")
    return value


def _number(cfg: Mapping[str, Any], key: str, kind: type) -> Any:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise ModelConfigError(f"model.{key} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    return kind(value)


def opt_float(
    cfg: Mapping[str, Any], key: str, default: float | None = None, *, minimum: float | None = None, positive: bool = False
) -> float | None:
    value = _number(cfg, key, float)
    if value is None:
        return default
    if positive and value <= 0:
        raise ModelConfigError(f"model.{key} must be greater than 0, got {value}")
    if minimum is not None and value < minimum:
        raise ModelConfigError(f"model.{key} must be at least {minimum}, got {value}")
    return value


def opt_int(cfg: Mapping[str, Any], key: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
    value = _number(cfg, key, int)
    if value is None:
        return default
    if minimum is not None and value < minimum:
        raise ModelConfigError(f"model.{key} must be at least {minimum}, got {value}")
    return value


def opt_bool(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelConfigError(f"model.{key} must be true or false, got {value!r}")
    return value


def tool_mode(cfg: Mapping[str, Any], default: str = "native") -> str:
    value = cfg.get("tool_mode")
    if value is None:
        return default
    if value not in TOOL_MODES:
        raise ModelConfigError(f"model.tool_mode must be one of {', '.join(TOOL_MODES)}; got {value!r}")
    return str(value)


def retry_policy(cfg: Mapping[str, Any]) -> RetryPolicy:
    """``max_retries`` (extra attempts, default 3), ``retry_base_delay_s``, ``retry_max_delay_s``."""
    retries = opt_int(cfg, "max_retries", 3, minimum=0)
    base = opt_float(cfg, "retry_base_delay_s", 0.5, minimum=0.0)
    cap = opt_float(cfg, "retry_max_delay_s", 8.0, minimum=0.0)
    assert retries is not None and base is not None and cap is not None
    return RetryPolicy.from_retries(retries, base, max(cap, base))


def resolve_api_key(
    cfg: Mapping[str, Any],
    *,
    default_env: str | None,
    placeholder: str | None = "not-needed",
    getenv: Callable[[str], str | None] = os.environ.get,
    provider: str | None = None,
) -> str:
    """The API key from the environment variable named by ``api_key_env``.

    A missing ``api_key_env`` key means ``default_env``; an explicit ``null`` means the server
    needs no key and ``placeholder`` is sent (the SDKs insist on a non-empty string). A named
    variable that is unset or empty is an error that names both the variable and the key
    (and ``provider``, when given, so a named provider's default variable is explained).
    """
    env = cfg["api_key_env"] if "api_key_env" in cfg else default_env
    if env is None:
        if placeholder is None:
            raise ModelConfigError("model.api_key_env is required for this provider (the name of an environment variable)")
        return placeholder
    if not isinstance(env, str) or not env.strip():
        raise ModelConfigError(f"model.api_key_env must be the name of an environment variable or null, got {env!r}")
    value = getenv(env)
    if not value:
        whose = f"model.provider {provider!r} needs an API key: " if provider else ""
        raise ModelConfigError(
            f"{whose}environment variable {env} is not set; it should hold the API key "
            f"(named by model.api_key_env; set model.api_key_env=null for servers that need no key)"
        )
    return value
