"""The last step into a sandbox, run as root inside fresh namespaces: `python -I -S enter.py SPEC_JSON ARGV...`.

`box.py` starts it through util-linux (`unshare --pid --fork --kill-child --mount --propagation private
--mount-proc --ipc [--net]`), so it already is process 1 of a PID namespace of its own, in a mount namespace of its own
with a /proc that shows only that namespace. Here, still root, it:

1. opens (O_PATH, no link followed) each folder of SPEC's `keep` (the role's own folder, its transfer folder, the
   interpreter and kernelzero when they live there) before they are hidden;
2. mounts a fresh tmpfs over each folder of SPEC's `private` (/tmp, /dev/shm, /var/tmp): no file another process
   put there is visible, and nothing written there outlives the namespace;
3. binds each kept folder back at its own path (through its descriptor, so a link planted meanwhile is not
   followed) and changes into SPEC's `cwd` through the new mounts (a working folder opened before step 2 would
   still lead, through `..`, to the hidden /tmp);
4. sets no core dumps and no_new_privs (no setuid program gives root back), drops every group and switches to
   SPEC's `uid` and `gid` (real, effective, saved), arms the death signal again (a change of uid clears the one
   `--kill-child` set: killing `unshare` then kills this process, and with it the namespace), then executes ARGV
   with the environment it was given. ARGV stays process 1: when it ends, the kernel kills every process left
   in the namespace (setsid daemons and double forks included).

It imports nothing of kernelzero and runs without site packages (`-S`): it is on the path of every sandboxed
process's start. Any failure exits with status 125 and one line on stderr; the caller reports it as a sandbox
that could not be set up, never as the candidate's fault.
"""

import ctypes
import json
import os
import resource
import sys

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 0x2, 0x4, 0x1000, 0x4000
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, SIGKILL = 38, 1, 9
SETUP_FAILED = 125


def _mount(libc, source, target: str, fstype, flags: int, data) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731 - a local helper
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def enter(spec: dict) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    kept = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)) for path in spec["keep"]]
    for folder in spec["private"]:
        _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for path, fd in kept:
        os.makedirs(path, 0o755, exist_ok=True)  # on the fresh tmpfs: root's, empty
        _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        os.close(fd)
    os.chdir(spec["cwd"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if spec["uid"] is not None:
        os.setgroups([])
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    if libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0:  # a change of uid cleared unshare's --kill-child
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def main(argv: list[str]) -> int:
    try:
        enter(json.loads(argv[0]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"kernelzero sandbox: could not enter the sandbox: {exc}\n")
        return SETUP_FAILED
    try:
        os.execv(argv[1], argv[1:])
    except OSError as exc:
        sys.stderr.write(f"kernelzero sandbox: could not run {argv[1]}: {exc}\n")
    return SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
