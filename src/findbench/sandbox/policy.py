"""What the sandbox allows: its limits, the layers a fork server must apply and how they are named.

Everything here is decided in the caller's process and handed to each fork server
(:mod:`findbench.sandbox._worker`) as its configuration: the limits (:class:`SandboxLimits`),
the seccomp filter, the paths a program may read, the bubblewrap command line around the
server, and the rule that refuses a server whose layers leave programs a way out.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import sys
import tempfile

from findbench._checks import number, positive_int
from findbench.constants import UsageError
from findbench.sandbox import _worker

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
DEFAULT_CPU_SECONDS = 5.0
DEFAULT_MEMORY_MB = 1024
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024
#: Bytes a program may write in all (its folder is a tmpfs of this size and of SandboxLimits.max_files files).
DEFAULT_MAX_DISK_BYTES = 64 * 1024 * 1024
#: Largest request (code and inputs, as JSON) of one program.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
#: Set to 1 to let the sandbox run code without a kernel boundary (no Landlock, no bwrap).
ALLOW_UNCONFINED_ENV = "FINDBENCH_ALLOW_UNCONFINED"
DIR_PREFIX = "findbench-sandbox-"
WORKER_SCRIPT = os.path.abspath(_worker.__file__)


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """The resources each program gets (what :class:`~findbench.sandbox.Sandbox`,
    :func:`~findbench.sandbox.run_functions` and the code metrics take).

    ``workers``: fork servers (``None``: ``min(4, os.cpu_count())``, and no more than there are
    programs in a one-shot :func:`~findbench.sandbox.run_functions`); ``timeout``: wall-clock
    seconds per program (loading it and all its inputs); ``cpu_seconds``: ``RLIMIT_CPU`` per
    program (1 s granularity upward); ``memory_mb``: address space in MiB (includes ~100-200 MiB
    of interpreter and numpy); ``max_output_bytes``: characters of stdout+stderr kept;
    ``max_result_bytes``: largest serialized result of one program (larger: status ``"error"``);
    ``max_file_bytes``: ``RLIMIT_FSIZE``; ``max_disk_bytes``, ``max_files``: size of the
    program's tmpfs (``Sandbox.isolation["disk_cap_bytes"]`` is ``None`` where no mount
    namespace could be made). Bad values raise :class:`~findbench.constants.UsageError` naming the field.
    """

    workers: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    cpu_seconds: float = DEFAULT_CPU_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_file_bytes: int = 16 * 1024 * 1024
    max_disk_bytes: int = DEFAULT_MAX_DISK_BYTES
    max_files: int = 4096

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if name in ("timeout", "cpu_seconds") and number(name, value) <= 0:
                raise UsageError(f"{name} must be > 0, got {value!r}")
            if name not in ("timeout", "cpu_seconds"):
                positive_int(name, value, optional=name == "workers")


class SandboxUnavailableError(RuntimeError):
    """A boundary is missing (Landlock or bwrap; seccomp or bwrap for file metadata) and the caller did not opt in."""


def isolation_level(isolation: dict) -> str:
    """The layers in a fork server's report joined by ``+`` (``"unconfined"`` without a kernel boundary)."""
    parts = [name for name, on in (
        ("bwrap", isolation.get("bwrap")),
        ("landlock", isolation.get("landlock")),
        ("seccomp", isolation.get("seccomp")),
        ("netns", isolation.get("network_namespace")),
        ("ipcns", isolation.get("ipc_namespace")),
        ("uid", isolation.get("uid", 0) != 0),
    ) if on]
    return "+".join(([] if isolation.get("bwrap") or isolation.get("landlock") else ["unconfined"]) + parts)


def unavailable_message(iso: dict) -> str | None:
    """Why a fork server's layers leave programs a way out of the sandbox; ``None`` when they do not."""
    if not (iso.get("landlock") or iso.get("bwrap")):
        why = (
            "Landlock was switched off (landlock=False)"
            if iso.get("landlock_abi", 0)
            else "this kernel does not offer Landlock (Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK and "
            "'landlock' in the lsm= boot parameter)"
        )
        why = f"no kernel boundary for untrusted code: {why}, and bubblewrap is not in use (apt-get install bubblewrap"
    elif not iso.get("file_metadata_locked"):
        why = (
            "programs could change the mode, owner, times and extended attributes of files their uid owns: "
            "no seccomp filter, and bubblewrap is not in use (apt-get install libseccomp2 or bubblewrap"
        )
    else:
        return None
    return (
        f"{why}, or bwrap=None/True). To run model-written code without that boundary, "
        f"opt in with allow_unconfined=True or {ALLOW_UNCONFINED_ENV}=1."
    )


def denied_paths() -> tuple[str, ...]:
    """What a program may never read even beneath a read-only root: findbench (its generators
    rebuild the ground truth) and its caches."""
    import findbench

    cache = os.environ.get("FINDBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "findbench")
    return tuple(os.path.realpath(p) for p in (os.path.dirname(os.path.abspath(findbench.__file__)), cache))


# Refused with EPERM (clone3 with ENOSYS, so the C library falls back to clone, whose flags a
# filter can read): the ways between programs or out of the sandbox the other layers leave open.
_SECCOMP_DENIED = (
    "keyctl", "add_key", "request_key",
    "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
    "shmget", "shmat", "shmdt", "shmctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "bpf", "perf_event_open", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "name_to_handle_at", "open_by_handle_at", "swapon", "swapoff", "reboot", "acct", "quotactl",
)
# Also refused with EPERM: every call that changes a file's mode, owner, times or extended
# attributes. Landlock leaves these to the file's owner, and a caller that is not root runs its
# programs as itself (the 32-bit names only exist on 32-bit hosts).
_SECCOMP_FILE_METADATA = (
    "chmod", "fchmod", "fchmodat", "fchmodat2",
    "chown", "fchown", "lchown", "fchownat", "chown32", "fchown32", "lchown32",
    "utime", "utimes", "utimensat", "futimesat", "utimensat_time64",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat", "file_setattr",
)
# Numbers of the newest of them (shared by x86-64 and aarch64) for a libseccomp that predates them.
_NEW_SYSCALLS = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469}
# ioctl requests that set a file's inode flags or fsxattr (chattr): FS_IOC_SETFLAGS, its 32-bit
# form, FS_IOC_FSSETXATTR.
_IOCTL_FILE_ATTRIBUTES = (0x40086602, 0x40046602, 0x401C5820)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                          0x00000080)


@functools.lru_cache(maxsize=1)
def seccomp_program() -> str | None:
    """The seccomp filter as base64 classic BPF (compiled by libseccomp through ``pyseccomp``);
    ``None`` and one warning without libseccomp (the sandbox then needs bwrap or an opt-in).
    Everything not listed is allowed."""
    import base64
    import errno
    import platform
    import socket

    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # no binding or no libseccomp.so.2
        logger.warning("sandbox: no seccomp filter (%s); install libseccomp2 and pyseccomp", exc)
        return None
    filt, eperm = sc.SyscallFilter(sc.ALLOW), sc.ERRNO(errno.EPERM)
    for name in _SECCOMP_DENIED + _SECCOMP_FILE_METADATA:
        nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if nr == -1 and platform.machine() in ("x86_64", "aarch64"):  # unknown to this libseccomp
            nr = _NEW_SYSCALLS.get(name, -1)
        if nr >= 0:  # negative: not a syscall of this architecture (or of this libseccomp)
            filt.add_rule(eperm, nr)
    for rule in (  # the chattr ioctls, clone3, namespace flags of clone, AF_UNIX sockets
        *((eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request)) for request in _IOCTL_FILE_ATTRIBUTES),
        (sc.ERRNO(errno.ENOSYS), "clone3"),
        *((eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag)) for flag in _CLONE_NAMESPACE_FLAGS),
        *((eperm, name, sc.Arg(0, sc.EQ, socket.AF_UNIX)) for name in ("socket", "socketpair")),
    ):
        filt.add_rule(*rule)
    with tempfile.TemporaryFile() as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        return base64.b64encode(fh.read()).decode()


def server_command(config: dict, bwrap: str | None) -> list[str]:
    """The command line of one fork server: the interpreter on ``_worker.py``, inside bubblewrap
    when ``bwrap`` (its path) is given: a mount namespace showing only what programs may read,
    the server's folder and ``/dev``."""
    command = [sys.executable, "-s", "-P", WORKER_SCRIPT, "--worker", json.dumps(config)]
    if not bwrap:
        return command
    # The read-only roots (the list the fork server gives Landlock), the interpreter by the name it
    # is started with and a virtual environment's marker (so the server finds numpy where the
    # caller does); nothing else of the environment. Merged-/usr systems: the symbolic links on the
    # ELF loader's path.
    venv_cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    binds = [(p, p) for p in _worker._read_roots(deny=denied_paths()) + [os.path.realpath(WORKER_SCRIPT)]]
    binds += [(os.path.realpath(sys.executable), sys.executable)] + (
        [(venv_cfg, venv_cfg)] if os.path.exists(venv_cfg) else [])
    links = [link for link in ("/lib", "/lib64", "/bin", "/usr/lib64") if os.path.islink(link)]
    tmpdir = config["tmpdir"]
    return [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", *(["--unshare-net"] if config["isolate_network"] else []),
            *(arg for source, target in binds for arg in ("--ro-bind", source, target)),
            *(arg for link in links for arg in ("--symlink", os.readlink(link), link)),
            "--dev", "/dev", "--proc", "/proc", "--bind", tmpdir, tmpdir, "--chdir", tmpdir, "--", *command]


#: The whole environment of a fork server (``HOME`` and ``TMPDIR`` are its own folder).
SERVER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
              "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}
