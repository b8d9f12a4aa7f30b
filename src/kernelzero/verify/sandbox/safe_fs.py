"""File operations for trusted code (the judge, the launcher, compile checks, the capture) on places the sandbox
user can write: the candidate's and the reference's folders, scratch folders, the transfer folders in /dev/shm.

What it defends: the verifier runs as root and drops its sandboxed children to an unprivileged user, who owns
their folders and may plant anything there: a symbolic link to /etc/shadow where root reads a log, a link to
/etc where root chowns a sub-folder, a FIFO where root reads a result (it blocks, or answers what the sandbox
writes into it), a hard link where root truncates a file. So root here:

- opens a folder once, before it hands it over (`open_folder`: O_DIRECTORY | O_NOFOLLOW, owned by this process's
  user and writable by no one else), then works relative to that descriptor (`dir_fd`), so a folder renamed or
  swapped for a link afterwards changes nothing root touches;
- names a single path component relative to such a descriptor, never a path through the sandbox's folders;
- creates files with O_CREAT | O_EXCL | O_NOFOLLOW (`write_new`: a planted name makes it fail, never follow),
  replaces one by renaming a fresh file over the name (`replace_file`: a planted link or hard link is only an
  entry that goes away), and changes owners of what it just created only through its own descriptor or with
  `follow_symlinks=False` (`chown_nofollow`);
- reads what the sandbox wrote only through `open_regular` / `read_regular`: O_NOFOLLOW | O_NONBLOCK, then fstat
  must say a regular file (a FIFO, device or socket is refused at once, without blocking), and a bounded read.

Folders every user's processes share (the GPU lease's lock folder in /tmp, sticky and open to all): `shared_folder`
refuses a link or a folder another user (the sandbox's, made first) owns, and `open_lock` opens a lock file there
without following a link, regular files only.

What it does not defend: a path root reaches through a folder the sandbox can write (use a descriptor); what a
regular file holds (the sandbox wrote it: treat its contents as untrusted input); anything when the sandboxed
process runs as root itself (sandbox/process.py: the plan's notes say so).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat

OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(PermissionError):
    """A path root must not act on: a link, a non-regular file, or a folder someone else owns or may write."""


def _one_name(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise UnsafePath(f"{name!r} is not a single file name")
    return name


def open_folder(path: str | os.PathLike) -> int:
    """A descriptor of the folder `path` (not a link), which must belong to this process's user and be writable by
    no one else: the folder root hands over later, opened while only root can change it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise UnsafePath(f"{path}: owned by uid {info.st_uid}, mode {stat.filemode(info.st_mode)}: not this user's own")
    return fd


def make_folder(dir_fd: int, name: str, owner: tuple[int, int] | None = None, mode: int = 0o700) -> None:
    """Create the folder `name` in `dir_fd` (it must not exist) and give it to `owner` (uid, gid) when given."""
    os.mkdir(_one_name(name), mode, dir_fd=dir_fd)
    if owner is not None:
        chown_nofollow(dir_fd, name, owner)


def chown_nofollow(dir_fd: int, name: str, owner: tuple[int, int]) -> None:
    """chown of the entry `name` itself (a link stays a link: its target is never touched)."""
    os.chown(_one_name(name), owner[0], owner[1], dir_fd=dir_fd, follow_symlinks=False)


def write_new(dir_fd: int, name: str, data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
    """Create `name` in `dir_fd` with `data`: fails (FileExistsError) when anything, a link included, is there."""
    fd = os.open(_one_name(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_FLAGS, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)  # whatever the umask
        if owner is not None:
            os.fchown(fd, owner[0], owner[1])
    finally:
        os.close(fd)


def replace_file(dir_fd: int, name: str, data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
    """Put a fresh file with `data` at `name` in `dir_fd`, atomically: whatever was there (a file, a link, a hard
    link to another file, a FIFO) is an entry that goes away; nothing is opened through it."""
    tmp = f".kz-new-{secrets.token_hex(8)}"
    write_new(dir_fd, tmp, data, mode, owner)
    try:
        os.rename(tmp, _one_name(name), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


def _open_file(path: str | os.PathLike, flags: int, mode: int = 0o600, dir_fd: int | None = None) -> int:
    """A descriptor of `path` opened with `flags`, not through a link in its last component, and only when it is a
    regular file (O_NONBLOCK: opening a FIFO never waits); UnsafePath otherwise."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | OPEN_FLAGS, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise UnsafePath(f"{path}: a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{path}: not a regular file")
    return fd


def open_regular(path: str | os.PathLike, dir_fd: int | None = None) -> int:
    """A read-only descriptor of `path` when it is a regular file, not through a link in its last component; a
    FIFO, device or socket raises UnsafePath at once."""
    return _open_file(path, os.O_RDONLY, dir_fd=dir_fd)


def read_regular(path: str | os.PathLike, limit: int, dir_fd: int | None = None) -> bytes:
    """At most `limit` bytes from the start of the regular file `path` (see `open_regular`)."""
    fd = open_regular(path, dir_fd)
    try:
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def shared_folder(path: str | os.PathLike, mode: int = 0o1777) -> None:
    """Make sure `path` is a real folder (created with `mode` when missing) owned by root or this process's user,
    so no other user can swap it for a link afterwards (it sits in a sticky folder such as /tmp); its mode is set
    through a descriptor. UnsafePath for a link, a non-folder, or another user's folder."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(f"{path}: a symbolic link or not a folder") from None
        raise
    try:
        info = os.fstat(fd)
        if info.st_uid not in (0, os.geteuid()):
            raise UnsafePath(f"{path}: owned by uid {info.st_uid}, not root's or this user's: remove it")
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def open_lock(path: str | os.PathLike, mode: int) -> int:
    """A read-write descriptor of the lock file `path` (created with `mode` when missing), not through a link in
    its last component, and only when it is a regular file (UnsafePath otherwise)."""
    return _open_file(path, os.O_RDWR | os.O_CREAT, mode)
