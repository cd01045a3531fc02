"""The seccomp filter the sandboxed child installs on itself before the model's code runs.

A classic-BPF program (no library needed): system calls that start programs or processes, open
sockets, reach into other processes, change namespaces or mounts, or use kernel facilities with
a history of privilege escalations answer ``EPERM``. ``clone`` is allowed only for threads
(``CLONE_THREAD`` set, no namespace flags); ``clone3`` answers ``ENOSYS``, because its flags sit
behind a pointer a filter cannot read, and glibc then falls back to ``clone`` for threads. A
call from any other ABI (i386 or x32 on x86-64, AArch32 on arm64) kills the process, so the
table cannot be sidestepped through a second syscall numbering.

The filter is built here, in the parent, and handed to the child as bytes; the child only
loads it with ``prctl(PR_SET_SECCOMP)``. Once loaded it can be neither removed nor loosened.
"""

from __future__ import annotations

import platform
import struct
import sys

# Denied system calls, by reason. Names missing from an architecture's table (arm64 has no
# fork) are skipped there.
_DENIED_BY_REASON = {
    "new programs and processes (clone is judged by its flags, clone3 answers ENOSYS)": (
        "execve execveat fork vfork"
    ),
    "sockets: no network, no local IPC with anything outside": "socket socketpair",
    "other processes' memory and descriptors": (
        "ptrace process_vm_readv process_vm_writev process_madvise pidfd_getfd kcmp"
    ),
    "namespaces, mounts and file handles that bypass paths": (
        "unshare setns mount umount2 pivot_root chroot open_tree move_mount fsopen fsconfig "
        "fsmount fspick mount_setattr name_to_handle_at open_by_handle_at"
    ),
    "kernel facilities with a history of privilege escalations": (
        "keyctl add_key request_key bpf perf_event_open userfaultfd io_uring_setup "
        "io_uring_enter io_uring_register fanotify_init"
    ),
    "machine administration": (
        "init_module finit_module delete_module kexec_load kexec_file_load reboot swapon swapoff "
        "acct quotactl syslog settimeofday clock_settime clock_adjtime adjtimex sethostname "
        "setdomainname vhangup personality"
    ),
    "x86 only": "iopl ioperm modify_ldt uselib _sysctl lookup_dcookie",
}
DENIED = tuple(name for names in _DENIED_BY_REASON.values() for name in names.split())

# Numbers from the kernel's uapi headers (asm/unistd_64.h and asm-generic/unistd.h);
# worker/tests/test_sandbox_seccomp.py compares them with the headers where those are installed.
X86_64 = {
    "execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435,
    "socket": 41, "socketpair": 53, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 312,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "fanotify_init": 300, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "quotactl": 179, "syslog": 103, "settimeofday": 164, "clock_settime": 227,
    "clock_adjtime": 305, "adjtimex": 159, "sethostname": 170, "setdomainname": 171,
    "vhangup": 153, "personality": 135, "iopl": 172, "ioperm": 173, "modify_ldt": 154,
    "uselib": 134, "_sysctl": 156, "lookup_dcookie": 212,
}  # fmt: skip
AARCH64 = {
    "execve": 221, "execveat": 281, "clone": 220, "clone3": 435, "socket": 198,
    "socketpair": 199, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 272, "unshare": 97, "setns": 268,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "name_to_handle_at": 264, "open_by_handle_at": 265, "keyctl": 219,
    "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 262,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
    "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89,
    "quotactl": 60, "syslog": 116, "settimeofday": 170, "clock_settime": 112,
    "clock_adjtime": 266, "adjtimex": 171, "sethostname": 161, "setdomainname": 162,
    "vhangup": 58, "personality": 92, "lookup_dcookie": 18,
}  # fmt: skip

# machine name → (AUDIT_ARCH_* value, syscall table, lowest number of a foreign ABI or None)
ARCHES = {
    "x86_64": (0xC000003E, X86_64, 0x40000000),  # x32 calls carry __X32_SYSCALL_BIT
    "aarch64": (0xC00000B7, AARCH64, None),
}
ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}

CLONE_THREAD = 0x00010000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
CLONE_NAMESPACES |= 0x20000000 | 0x40000000
EPERM, ENOSYS = 1, 38

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO, _KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH = 0, 4
_ARG0_LOW = 16 if sys.byteorder == "little" else 20


def machine() -> str:
    name = platform.machine().lower()
    return ALIASES.get(name, name)


def program(arch: str | None = None) -> bytes | None:
    """The filter for ``arch`` (default: this machine) as packed ``sock_filter`` records.

    None where the architecture is not supported; the caller then treats seccomp as missing.
    """
    arch = arch or machine()
    if arch not in ARCHES:
        return None
    audit_arch, table, foreign = ARCHES[arch]
    denied = [table[name] for name in DENIED if name in table]
    # Each entry: (code, k, jump-if-true label, jump-if-false label); None means the next one.
    body: list[tuple[int, int, str | None, str | None]] = [
        (_LD_ABS, _ARCH, None, None),
        (_JEQ, audit_arch, None, "kill"),
        (_LD_ABS, _NR, None, None),
    ]
    if foreign is not None:
        body.append((_JGE, foreign, "kill", None))
    body.append((_JEQ, table["clone"], "clone", None))
    body.append((_JEQ, table["clone3"], "enosys", None))
    body += [(_JEQ, number, "eperm", None) for number in denied]
    body.append((_RET, _ALLOW, None, None))
    labels = {"clone": len(body)}
    body += [
        (_LD_ABS, _ARG0_LOW, None, None),
        (_JSET, CLONE_THREAD, None, "eperm"),
        (_JSET, CLONE_NAMESPACES, "eperm", None),
        (_RET, _ALLOW, None, None),
    ]
    for label, action in (("eperm", _ERRNO | EPERM), ("enosys", _ERRNO | ENOSYS)):
        labels[label] = len(body)
        body.append((_RET, action, None, None))
    labels["kill"] = len(body)
    body.append((_RET, _KILL_PROCESS, None, None))

    def offset(index: int, label: str | None) -> int:
        # Classic BPF jumps only forward, relative to the next instruction, within a byte.
        jump = 0 if label is None else labels[label] - index - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp jump out of range at {index}")
        return jump

    return b"".join(
        struct.pack("=HBBI", code, offset(i, jt), offset(i, jf), k)
        for i, (code, k, jt, jf) in enumerate(body)
    )
