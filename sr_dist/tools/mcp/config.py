"""Launch configuration of MCP stdio servers: validated, frozen, and trusted.

An ``MCPServerConfig`` comes only from Hydra config files or the command line (the top-level
``servers`` list), never from a model's tool call: it names a program to run, so it is as
trusted as the rest of the run's configuration. Validation happens here, before anything is
launched, and every error names the offending key (``servers[1].call_timeout_s: ...``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = ["KEY_ALIASES", "MCPConfigError", "MCPServerConfig", "parse_servers", "SERVER_NAME_PATTERN"]

#: What a server name may look like (it appears in logs, reasons and results).
SERVER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Tool-name prefixes must keep tool names acceptable to every provider.
_PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9_-]{0,32}$")
#: Thea's spellings of our keys (``servers[i].call_timeout_sec`` is ``call_timeout_s``), so a
#: server entry written for Thea's harness works as written.
KEY_ALIASES: Mapping[str, str] = MappingProxyType(
    {"call_timeout_sec": "call_timeout_s", "timeout_argument_margin_sec": "timeout_argument_margin_s"}
)


class MCPConfigError(ValueError):
    """The ``servers`` configuration is wrong (bad key, bad value, duplicate or colliding name)."""


class _Invalid(Exception):
    """One bad field, before we know where in the config it came from."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class MCPServerConfig:
    """One trusted MCP stdio server: how to launch it and how long to wait for it.

    ``env`` is added to a small safe environment (``HOME``, ``PATH``, ``USER``, ...), not to the
    whole environment of the run, so API keys do not leak into servers unless named here.
    ``call_timeout_s`` bounds one call. For a tool whose input schema has a ``timeout_s``
    (or Thea's ``timeout_sec``) property, a call that passes ``T`` waits ``max(call_timeout_s,
    T + timeout_argument_margin_s)``, never more than ``max_call_timeout_s``. Thea's key
    spellings (``call_timeout_sec``, ...) are read by :meth:`from_mapping`. ``prefix`` is put
    in front of every tool name of this server (to avoid collisions).
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    startup_timeout_s: float = 30.0
    call_timeout_s: float = 60.0
    timeout_argument_margin_s: float = 10.0
    max_call_timeout_s: float = 3600.0
    prefix: str = ""

    def __post_init__(self) -> None:
        try:
            _validate(self)
        except _Invalid as bad:
            who = f"MCP server {self.name!r}" if isinstance(self.name, str) else "MCP server"
            raise MCPConfigError(f"{who}: {bad.key} {bad.problem}") from None

    @classmethod
    def from_mapping(cls, raw: Any, *, where: str = "server") -> MCPServerConfig:
        """Build from a config mapping (a dict or an OmegaConf node); unknown keys are an error.

        Thea's key spellings (:data:`KEY_ALIASES`) are accepted; an error about such a key names
        it as written, and giving both spellings of one key with different values is an error.
        """
        raw = _plain(raw)
        if not isinstance(raw, Mapping):
            raise MCPConfigError(f"{where}: expected a mapping with name, command, ...; got {type(raw).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in raw if k not in known and k not in KEY_ALIASES)
        if unknown:
            raise MCPConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join([*known, *KEY_ALIASES])}"
            )
        raw, spelled = _resolve_aliases(raw, where)
        for required in ("name", "command"):
            if raw.get(required) in (None, ""):
                raise MCPConfigError(f"{where}.{required} is required")
        values: dict[str, Any] = dict(raw)
        values["args"] = _strings(raw.get("args"), f"{where}.args")
        values["env"] = _environment(raw.get("env"), f"{where}.env")
        for key in ("startup_timeout_s", "call_timeout_s", "timeout_argument_margin_s", "max_call_timeout_s"):
            if key in values and values[key] is None:
                del values[key]
        if values.get("prefix") is None:
            values.pop("prefix", None)
        try:
            _validate_values(values)
        except _Invalid as bad:
            raise MCPConfigError(f"{where}.{spelled.get(bad.key, bad.key)}: {bad.problem}") from None
        return cls(**values)


def _resolve_aliases(raw: Mapping[Any, Any], where: str) -> tuple[dict[Any, Any], dict[str, str]]:
    """``raw`` with Thea's spellings renamed to ours, and which of our keys were spelled how.

    A ``null`` spelling counts as absent (``null`` means the default everywhere here); both
    spellings with different values cannot both be meant, so that is an error naming both.
    """
    values = dict(raw)
    spelled: dict[str, str] = {}
    for alias, key in KEY_ALIASES.items():
        if alias not in values:
            continue
        given = values.pop(alias)
        if given is None:
            continue
        ours = values.get(key)
        if ours is not None and not _same_value(ours, given):
            raise MCPConfigError(
                f"{where}: {key} ({ours!r}) and {alias} ({given!r}) are two spellings of one setting "
                f"with different values; give only one of them"
            )
        values[key] = given
        if ours is None:
            spelled[key] = alias
    return values, spelled


def _same_value(a: Any, b: Any) -> bool:
    """Equal, and of the same sort (``True`` is not the same setting as ``1``)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _validate_values(values: Mapping[str, Any]) -> None:
    defaults = {f.name: f.default for f in fields(MCPServerConfig) if f.default is not MISSING}
    _validate(_Values({**defaults, "env": {}, **values}))


class _Values:
    """Attribute access over a mapping, so one validator serves both entry points."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)


def _validate(c: Any) -> None:
    """Raise ``_Invalid(key, problem)`` for the first bad field of a config (or its raw values)."""
    if not isinstance(c.name, str) or not SERVER_NAME_PATTERN.match(c.name):
        raise _Invalid("name", f"must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit; got {c.name!r}")
    if not isinstance(c.command, str) or not c.command.strip():
        raise _Invalid("command", f"must be a non-empty string, got {c.command!r}")
    if not isinstance(c.args, tuple) or not all(isinstance(a, str) for a in c.args):
        raise _Invalid("args", f"must be a tuple of strings, got {c.args!r}")
    if not isinstance(c.env, Mapping) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in c.env.items()):
        raise _Invalid("env", f"must map variable names to strings, got {c.env!r}")
    if c.cwd is not None and (not isinstance(c.cwd, str) or not c.cwd):
        raise _Invalid("cwd", f"must be a non-empty string or null, got {c.cwd!r}")
    for key in ("startup_timeout_s", "call_timeout_s", "max_call_timeout_s"):
        if not _positive(getattr(c, key)):
            raise _Invalid(key, f"must be a positive number, got {getattr(c, key)!r}")
    margin = c.timeout_argument_margin_s
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not (math.isfinite(margin) and margin >= 0):
        raise _Invalid("timeout_argument_margin_s", f"must be a number >= 0, got {margin!r}")
    if c.call_timeout_s > c.max_call_timeout_s:
        raise _Invalid("call_timeout_s", f"({c.call_timeout_s:g}) exceeds max_call_timeout_s ({c.max_call_timeout_s:g})")
    if not isinstance(c.prefix, str) or not _PREFIX_PATTERN.match(c.prefix):
        raise _Invalid("prefix", f"must be up to 32 letters, digits, '_' or '-', got {c.prefix!r}")


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _plain(value: Any) -> Any:
    """OmegaConf nodes (``DictConfig``/``ListConfig``) as plain containers; anything else as is."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        return value
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _scalar_text(value: Any) -> str | None:
    """A command-line scalar as text (Hydra turns ``8000`` into an int); None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise MCPConfigError(f"{where} must be a list of strings, got {value!r}")
    out = []
    for index, item in enumerate(value):
        text = _scalar_text(item)
        if text is None:
            raise MCPConfigError(f"{where}[{index}] must be a string, got {item!r}")
        out.append(text)
    return tuple(out)


def _environment(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MCPConfigError(f"{where} must map variable names to strings, got {value!r}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise MCPConfigError(f"{where}: {key!r} is not a valid environment variable name")
        text = _scalar_text(item)
        if text is None:
            raise MCPConfigError(f"{where}.{key} must be a string, got {item!r} (quote it)")
        out[key] = text
    return out


def parse_servers(raw: Any) -> tuple[MCPServerConfig, ...]:
    """The top-level ``servers`` list as configs; ``None`` or empty means none.

    ``MCPConfigError`` names the entry and key at fault, including a duplicate server name.
    Already-built ``MCPServerConfig`` values pass through (and are checked for duplicates).
    """
    raw = _plain(raw)
    if raw is None:
        return ()
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable) or isinstance(raw, Mapping):
        raise MCPConfigError(f"servers must be a list of server entries, got {type(raw).__name__}")
    configs: list[MCPServerConfig] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(raw):
        where = f"servers[{index}]"
        config = entry if isinstance(entry, MCPServerConfig) else MCPServerConfig.from_mapping(entry, where=where)
        if config.name in seen:
            raise MCPConfigError(
                f"{where}.name: duplicate MCP server name {config.name!r} (also servers[{seen[config.name]}])"
            )
        seen[config.name] = index
        configs.append(config)
    return tuple(configs)
