"""Small durable-file primitives every storage module shares (blocking, no Twisted).

- :func:`write_all` and :func:`pwrite_all` loop over ``os.write``/``os.pwrite``, which may
  write less than asked (a signal, a nearly full disk).
- :func:`read_file` reads a whole small file, never through a symlink.
- :func:`read_at_most` reads a whole file of at most so many bytes (a config file, a
  CA bundle): a larger one is an error, not read further.
- :func:`datasync` flushes a file's data and size (``fdatasync`` where there is one).
- :func:`removed_on_error` removes a file being written when the writing fails.
- :func:`fsync_dir` makes a create, rename or unlink in a directory survive a power cut.
- :func:`atomic_write` replaces a whole file so that a crash at any moment leaves either
  the old content or the new, never a mixture: write a temporary file beside it, fsync
  it, rename it over the target, fsync the directory. :func:`write_temp` and
  :func:`replace_durably` are its two halves, for callers that must act between them
  (open the new file before it takes the old one's name, for instance).

Errors are raised as :class:`OSError`; callers turn them into their own storage errors
with a message that names what they were writing. What this module does not do: decide
what is written, buffer, retry, or know any file format.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "TEMP_SUFFIX",
    "atomic_write",
    "cut_back",
    "datasync",
    "fsync_dir",
    "pwrite_all",
    "read_at_most",
    "read_file",
    "removed_on_error",
    "replace_durably",
    "write_all",
    "write_temp",
]

#: Permissions of every file the broker creates: the data is the users', not the world's.
FILE_MODE = 0o600
#: Permissions of every directory the broker creates.
DIR_MODE = 0o700
#: Suffix of the temporary file :func:`atomic_write` renames into place. A file with this
#: suffix left behind by a crash is garbage and may be deleted.
TEMP_SUFFIX = ".tmp"

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


_Buffer = bytes | bytearray | memoryview


def write_all(fd: int, data: _Buffer) -> None:
    """Write every byte of ``data`` at ``fd``'s position."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def pwrite_all(fd: int, data: _Buffer, pos: int) -> None:
    """Write every byte of ``data`` at byte ``pos`` of ``fd`` (the fd position is unused)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, pos)
        if written <= 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]
        pos += written


def read_file(path: str) -> bytes | None:
    """The whole content of ``path``, or None if it does not exist. A symlink is refused
    (``ELOOP``) rather than followed; other errors raise :class:`OSError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_at_most(path: str, limit: int) -> bytes:
    """The whole content of ``path`` if it holds at most ``limit`` bytes; a larger file
    raises :class:`OSError` ``EFBIG`` (its ``strerror`` "larger than ``limit`` bytes"),
    as do the errors of opening and reading it."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def datasync(fd: int) -> None:
    """Flush ``fd``'s data and size to stable storage (enough for an append-only file)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS has no fdatasync
        os.fsync(fd)


def cut_back(fd: int, size: int) -> bool:
    """Truncate a journal back to its intact ``size`` after a failed append; True if the
    file now has exactly that length (so the next append starts at a record boundary)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)
    try:
        return os.fstat(fd).st_size == size
    except OSError:
        return False


@contextlib.contextmanager
def removed_on_error(path: str) -> Iterator[None]:
    """Remove ``path`` (as far as it can be) when the block raises, then let the error
    through: a half-written file is never left behind."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def fsync_dir(path: str) -> None:
    """fsync a directory so that a file created, renamed or removed in it stays so."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temp(path: str, data: bytes, *, mode: int = FILE_MODE) -> str:
    """Write ``data`` to a fresh temporary file beside ``path``, fsync it and return its
    name. A stale temporary file from an earlier crash is removed first; the file is
    created exclusively and never through a symlink. On error nothing is left behind."""
    temp = path + TEMP_SUFFIX
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    fd = os.open(temp, _CREATE_FLAGS, mode)
    with removed_on_error(temp):
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    return temp


def replace_durably(temp: str, path: str) -> None:
    """Rename ``temp`` over ``path`` and fsync the directory that holds them."""
    os.replace(temp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


class ReplaceFailed(Exception):
    """The rename of a complete rewritten copy, or the directory fsync after it, failed:
    which of the two files a crash would leave behind is unknown. ``cause`` is the
    OSError."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def rewrite_for_append(path: str, data: bytes) -> int:
    """Durably replace the journal at ``path`` by a copy holding ``data`` (a compaction)
    and return a descriptor of the new file open for appending: opened before the
    rename, so it follows the new inode.

    An OSError means nothing changed: the old file is intact and still the journal, and
    no temporary file is left. :class:`ReplaceFailed` means the copy was complete but its
    rename or the directory sync failed; the caller must then refuse further appends."""
    temp = write_temp(path, data)
    with removed_on_error(temp):
        fd = os.open(temp, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        replace_durably(temp, path)
    except OSError as exc:
        os.close(fd)
        raise ReplaceFailed(exc) from exc
    return fd


def atomic_write(path: str, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Replace ``path`` by ``data``: after a crash it holds the old content or the new."""
    replace_durably(write_temp(path, data, mode=mode), path)
