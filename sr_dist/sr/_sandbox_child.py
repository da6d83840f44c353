"""The child side of ``run_python``: confine this process, load the data, run the model's code.

Run as a script by :func:`sr_dist.sr.sandbox.run_sandboxed` (``python -I <this file> <settings>``),
never imported: it imports nothing of sr-dist, so the child starts from the standard library,
numpy, pandas and scipy alone. The order matters: everything that needs the network, new
files or more processes happens *before* the confinement, and the model's code runs after it.

It reports how the confinement went on one line of the pipe the parent names (a JSON object), so the parent
can say what held and what was unavailable instead of pretending.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import traceback
from typing import Any

CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_KEEPCAPS = 8
PR_SET_PDEATHSIG = 1
CAP_DAC_READ_SEARCH = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# Landlock system calls: the same numbers on x86_64 and aarch64 (the generic table).
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
# Filesystem rights, by the ABI version that added them.
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ABI1 = (1 << 13) - 1
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1
#: Exit status the parent reads as "the memory limit was hit" (a caught MemoryError).
EXIT_MEMORY = 86
#: Exit status for a sandbox that could not be set up as required (nothing of the code ran).
EXIT_SETUP = 87
#: The gid the code runs as when the sandbox starts as root (nobody's group).
NOBODY = 65534
#: As root the code runs as uid ``SANDBOX_UID_BASE + <this process's pid>``: a user no other
#: process has (pids are unique, pid_max is at most 2**22), so RLIMIT_NPROC counts this
#: sandbox's processes alone, never those of concurrent sandboxes (which a shared ``nobody``
#: would add up: parallel agents' calls then could not start), and no two sandboxes can signal
#: or ptrace each other.
SANDBOX_UID_BASE = 2_000_000_000


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _errno_text() -> str:
    return os.strerror(ctypes.get_errno())


def _map_ids(uid: int, gid: int) -> None:
    """Map our own ids into a new user namespace, so files keep their owners."""
    try:
        with open("/proc/self/setgroups", "w") as fh:
            fh.write("deny")
        with open("/proc/self/uid_map", "w") as fh:
            fh.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as fh:
            fh.write(f"{gid} {gid} 1")
    except OSError:
        pass  # unmapped ids still run; the namespaces are already in place


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def sandbox_uid() -> int:
    """The uid the code runs as when the sandbox starts as root (see :data:`SANDBOX_UID_BASE`)."""
    return SANDBOX_UID_BASE + os.getpid()


def drop_root(libc: Any, scratch: str) -> str:
    """As root, become an unprivileged user of its own (:data:`SANDBOX_UID_BASE`, group
    nobody) keeping only CAP_DAC_READ_SEARCH (the Python installation may sit under a
    root-only home; Landlock still bounds what is read): root's process limit is never
    enforced, and root may write what nobody else can. Says who runs the code."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return f"uid {os.geteuid()} (not root: runs as the caller)"
    uid = sandbox_uid()
    for folder, _, files in os.walk(scratch):
        os.chown(folder, uid, NOBODY)
        for name in files:
            os.chown(os.path.join(folder, name), uid, NOBODY)
    if libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(KEEPCAPS): {_errno_text()}")
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(uid)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = 1 << CAP_DAC_READ_SEARCH
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), f"capset: {_errno_text()}")
    return f"uid {uid} (unprivileged, of its own; may read any file Landlock allows)"


def _own_tasks() -> int:
    """Processes and threads of this uid now (RLIMIT_NPROC counts them all, not only ours)."""
    uid, count = os.getuid(), 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return count


def isolate_namespaces(libc: Any) -> dict[str, str]:
    """New network and PID namespaces (in a new user namespace where possible): no interfaces
    but a loopback that is down, and every process of the code dies with the code's first
    process. Says ``ok`` for each, or why it is unavailable."""
    if not sys.platform.startswith("linux"):
        why = f"unavailable: no namespaces on {sys.platform}"
        return {"network": why, "pid": why}
    uid, gid = os.getuid(), os.getgid()
    # As root the user namespace is not needed (and not wanted: the code then drops root).
    tries = ((CLONE_NEWNET | CLONE_NEWPID, False), (CLONE_NEWNET, False)) if uid == 0 else (
        (CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID, True), (CLONE_NEWUSER | CLONE_NEWNET, True))
    errors: list[str] = []
    for flags, user in tries:
        if libc.unshare(flags) == 0:
            if user:
                _map_ids(uid, gid)
            pid = "ok" if flags & CLONE_NEWPID else f"unavailable: unshare(CLONE_NEWPID) failed ({errors[-1]})"
            return {"network": "ok", "pid": pid}
        errors.append(_errno_text())
    why = f"unavailable: unshare(CLONE_NEWNET) failed ({errors[0]})"
    return {"network": why, "pid": why}


def _add_path(libc: Any, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this machine does not have
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = _PathBeneath(rights, fd)
        if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.byref(attr), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}): {_errno_text()}")
    finally:
        os.close(fd)


def confine_files(libc: Any, scratch: str, readable: list[str]) -> dict[str, Any]:
    """Landlock: writes only under ``scratch``, reads only there and under ``readable``, no TCP
    bind or connect (ABI 4+), no signals or abstract sockets outside the sandbox (ABI 6+)."""
    if not sys.platform.startswith("linux"):
        return {"files": f"unavailable: no Landlock on {sys.platform}", "abi": 0}
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 1:
        return {"files": f"unavailable: the kernel has no Landlock ({_errno_text()})", "abi": 0}
    fs = FS_ABI1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (
        FS_IOCTL_DEV if abi >= 5 else 0)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return {"files": f"unavailable: landlock_create_ruleset failed ({_errno_text()})", "abi": abi}
    try:
        _add_path(libc, ruleset, scratch, fs)
        for path in ("/dev/null", "/dev/zero"):
            _add_path(libc, ruleset, path, FS_READ_FILE | FS_WRITE_FILE)
        for path in readable:
            _add_path(libc, ruleset, path, READ_RIGHTS)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(NO_NEW_PRIVS): {_errno_text()}")
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {_errno_text()}")
    finally:
        os.close(ruleset)
    return {"files": "ok", "abi": abi, "tcp": "ok" if net else "unavailable: Landlock ABI < 4",
            "signals": "ok" if scoped else "unavailable: Landlock ABI < 6"}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
#: Per architecture (machine name): the audit arch and the number of socket(2).
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
_SYS_IO_URING_SETUP = 425  # the same on both: io_uring could open sockets past the filter
_AF_UNIX = 1
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1


def block_unix_sockets(libc: Any) -> dict[str, str]:
    """A seccomp filter: ``socket(AF_UNIX, ...)`` fails with EPERM (and io_uring, which could
    open one past the filter, is unavailable). A network namespace leaves Unix sockets named
    by a path reachable (a D-Bus bus, a daemon's control socket); Landlock does not cover
    connecting to them. ``socketpair`` (a private pair, as multiprocessing uses) still works."""
    machine = os.uname().machine
    if not sys.platform.startswith("linux") or machine not in _SECCOMP_ARCH:
        return {"unix_sockets": f"unavailable: no seccomp filter for {sys.platform}/{machine}"}
    arch, nr_socket = _SECCOMP_ARCH[machine]
    program = [  # (code, jt, jf, k); jumps count from the next instruction
        (_LD_ABS, 0, 0, 4),                     # 0: the architecture
        (_JEQ, 0, 6, arch),                     # 1: another one (a compat ABI): deny
        (_LD_ABS, 0, 0, 0),                     # 2: the system call number
        (_JGE, 4, 0, 0x40000000),               # 3: x32 numbers: deny
        (_JEQ, 3, 0, _SYS_IO_URING_SETUP),      # 4: io_uring: deny
        (_JEQ, 0, 3, nr_socket),                # 5: not socket(2): allow
        (_LD_ABS, 0, 0, 16),                    # 6: its first argument (low half): the family
        (_JEQ, 0, 1, _AF_UNIX),                 # 7: AF_UNIX: deny, else allow
        (_RET, 0, 0, _RET_EPERM),               # 8
        (_RET, 0, 0, _RET_ALLOW),               # 9
    ]
    filters = (_SockFilter * len(program))(*(_SockFilter(*op) for op in program))
    prog = _SockFprog(len(program), filters)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(
            PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return {"unix_sockets": f"unavailable: seccomp failed ({_errno_text()})"}
    return {"unix_sockets": "ok"}


def _mapped_bytes() -> int:
    """Address space mapped now (0 where /proc does not say: the limit is then absolute)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def set_limits(settings: dict[str, Any], mapped: int, tasks: int) -> None:
    """The resource limits (what the code may add to what the start-up already used)."""
    # RLIMIT_CPU counts the whole process: the seconds spent starting up come on top.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(usage.ru_utime + usage.ru_stime + 0.999) + int(settings["cpu_s"])
    # Soft = hard: the code runs as a PID namespace's first process, which ignores SIGXCPU,
    # so the kill comes at the hard limit.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    # On top of what is mapped now (the interpreter, numpy, pandas, scipy and their thread
    # pools reserve far more address space than they use).
    memory = mapped + int(settings["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = int(settings["file_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    nproc = tasks + int(settings["processes"])
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    files = int(settings["open_files"])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_code(code: str, namespace: dict[str, Any]) -> int:
    """Run the model's code; its exit status (a caught MemoryError is :data:`EXIT_MEMORY`)."""
    try:
        exec(compile(code, "<run_python>", "exec"), namespace)  # the whole point of this process
    except MemoryError:
        sys.stderr.write("MemoryError: the memory limit was reached\n")
        return EXIT_MEMORY
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the model's own error, shown to it
        traceback.print_exc()
        return 1
    return 0


def main() -> int:
    with open(sys.argv[1]) as fh:
        settings = json.load(fh)
    scratch = settings["scratch"]
    report = os.fdopen(int(settings["report_fd"]), "w", buffering=1)
    os.chdir(scratch)
    # Imported now, while /proc can still be read (scipy stays importable from sys.path, and
    # is left to the code that wants it: importing it costs a second).
    import numpy as np
    import pandas as pd  # type: ignore[import-untyped]

    X = np.load(os.path.join(scratch, "X.npy"))
    y = np.load(os.path.join(scratch, "y.npy"))
    names = list(settings["names"])
    target = str(settings["target"])
    df = pd.DataFrame(X, columns=names)
    df[target] = y
    with open(os.path.join(scratch, "code.py")) as fh:
        code = fh.read()

    libc = _libc()
    status: dict[str, Any] = isolate_namespaces(libc)
    try:
        status["user"] = drop_root(libc, scratch)
    except OSError as exc:
        print(f"run_python: could not stop being root ({exc}); the code did not run", file=sys.stderr)
        return EXIT_SETUP
    mapped = _mapped_bytes()  # now: /proc is not readable once confined
    tasks = 1 if os.getuid() == sandbox_uid() else _own_tasks()
    readable = [p for p in {*settings["readable"], *sys.path} if p and os.path.exists(p)]
    try:
        status.update(confine_files(libc, scratch, readable))
    except OSError as exc:
        status["files"] = f"unavailable: {exc}"
    status.update(block_unix_sockets(libc))
    if status.get("files") != "ok" and os.getuid() == sandbox_uid():
        # CAP_DAC_READ_SEARCH was kept for Landlock to bound; without Landlock it would let
        # the code read every file on the machine, so an unprivileged user's rights are all
        # it keeps.
        empty = (_CapData * 2)()
        if libc.capset(ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), empty) != 0:
            print(f"run_python: could not drop CAP_DAC_READ_SEARCH ({_errno_text()}); the code "
                  "did not run", file=sys.stderr)
            return EXIT_SETUP
        status["user"] = f"uid {os.getuid()} (no capabilities: Landlock is unavailable)"
    try:
        set_limits(settings, mapped, tasks)
        status["limits"] = "ok"
    except (OSError, ValueError) as exc:
        status["limits"] = f"failed: {exc}"
    report.write(json.dumps(status) + "\n")
    if str(status["limits"]).startswith("failed"):
        print(f"run_python: the limits could not be set ({status['limits']}); the code did not run",
              file=sys.stderr)
        return EXIT_SETUP

    namespace: dict[str, Any] = {"__name__": "__main__", "np": np, "pd": pd, "X": X, "y": y,
                                 "df": df, "names": names, "target": target}
    namespace.update({name: X[:, j] for j, name in enumerate(names)
                      if name.isidentifier() and name not in namespace})
    # The code runs in a child: the first process of the new PID namespace, so when it ends
    # the kernel ends every process it left behind (a fork bomb's included).
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"run_python: could not start the code's process ({exc})", file=sys.stderr)
        return EXIT_SETUP
    if pid == 0:
        report.close()
        # Dies with this process (the parent kills it at the wall clock), even if the code
        # leaves the process group with setsid(); the parent also kills it by the pid below.
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
        rc = run_code(code, namespace)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    report.write(json.dumps({"code_pid": pid}) + "\n")
    _, wait_status = os.waitpid(pid, 0)
    report.write(json.dumps({"exit": os.waitstatus_to_exitcode(wait_status)}) + "\n")
    report.close()
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
