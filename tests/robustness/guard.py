"""Proof that untrusted text is only read, never run: Python audit events and sentinel payloads.

:func:`watching` arms a process-wide audit hook (``sys.addaudithook``) for the current thread and
collects the events that would mean something was *executed* or the outside world was touched
(``exec`` of a code object, a new ``import``, ``open``, ``os.system``, ``subprocess.Popen``,
sockets, ...). The sentinel payloads are Python snippets that, if anything ever evaluated them,
would create :data:`SENTINEL_FILE` or set ``builtins.SR_DIST_PWNED``; tests assert neither
happened.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

#: A file that only an executed payload could create (per process, so runs do not interfere).
SENTINEL_FILE = Path(tempfile.gettempdir()) / f"sr-dist-pwned-{os.getpid()}"
#: The attribute an executed payload would set on ``builtins``.
SENTINEL_ATTR = "SR_DIST_PWNED"

_S = str(SENTINEL_FILE)
#: Snippets that would leave a trace if evaluated by ``eval``/``exec``/``sympify``/``pickle``.
PAYLOADS: tuple[str, ...] = (
    f"__import__('pathlib').Path('{_S}').touch()",
    f"open('{_S}', 'w').write('x')",
    f"__import__('os').system('touch {_S}')",
    f"__import__('builtins').__setattr__('{SENTINEL_ATTR}', 1)",
    f"exec(\"import builtins; builtins.{SENTINEL_ATTR} = 1\")",
    f"eval(compile(\"open('{_S}', 'w')\", 's', 'eval'))",
    f"globals().update({SENTINEL_ATTR}=1)",
    f"[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0](['touch', '{_S}'])",
    f"lambda: open('{_S}', 'w')",
    f"(lambda: __import__('pathlib').Path('{_S}').touch())()",
    "(lambda f: f(f))(lambda f: f(f))",
    f"x.__class__.__init__.__globals__['__builtins__']['open']('{_S}', 'w')",
    "Symbol('x').__class__.__mro__[-1].__subclasses__()",
    f"x if __import__('os').system('touch {_S}') else y",
    f"sin(x); __import__('os').system('touch {_S}')",
    f"{{'a': __import__('os').system('touch {_S}')}}",
    f"__builtins__.__dict__['{SENTINEL_ATTR}'] = 1",
    "cos(x).__reduce__()",
    f"x*y + [open('{_S}', 'w')]",
)

# Events that mean code ran or the outside world was touched. ``compile`` is listed separately:
# the formula parser never compiles anything; the text parser may build a Python *AST*
# (``ast.parse`` raises the ``compile`` event) and then only reads literals from it.
_EXECUTION_EVENTS = frozenset({
    "exec", "import", "open", "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn",
    "os.spawn", "os.fork", "os.forkpty", "os.startfile", "os.kill", "os.remove", "os.rename",
    "os.mkdir", "os.rmdir", "os.truncate", "os.chmod", "shutil.rmtree", "shutil.copyfile",
    "socket.connect", "socket.bind", "socket.getaddrinfo", "ctypes.dlopen", "ctypes.dlsym",
    "builtins.input", "pickle.find_class", "marshal.loads", "urllib.Request",
    "code.__new__", "function.__new__", "object.__setattr__",
})

_armed: dict[int, tuple[list[tuple[str, str]], frozenset[str]]] = {}
_installed = False
_install_lock = threading.Lock()


def _hook(event: str, args: tuple[object, ...]) -> None:
    if not _armed:
        return
    slot = _armed.get(threading.get_ident())
    if slot is None:
        return
    seen, watched = slot
    if event in watched:
        seen.append((event, repr(args)[:200]))


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)  # hooks cannot be removed; it is idle unless armed
            _installed = True


@contextlib.contextmanager
def watching(*, allow_compile: bool = False) -> Iterator[list[tuple[str, str]]]:
    """Collect execution-like audit events raised on this thread inside the ``with`` block."""
    _install()
    events: list[tuple[str, str]] = []
    watched = _EXECUTION_EVENTS if allow_compile else _EXECUTION_EVENTS | {"compile"}
    ident = threading.get_ident()
    _armed[ident] = (events, watched)
    try:
        yield events
    finally:
        _armed.pop(ident, None)


def assert_no_sentinel() -> None:
    """Fail if any payload ever ran in this process."""
    assert not SENTINEL_FILE.exists(), f"a payload created {SENTINEL_FILE}"
    assert not hasattr(builtins, SENTINEL_ATTR), f"a payload set builtins.{SENTINEL_ATTR}"
