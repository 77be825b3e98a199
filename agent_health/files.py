"""Atomic file writes with the user's umask (the bottom layer: stores, reports and recordings use it).

A crash never leaves a half-written file in place of a good one: data goes to a temporary file
beside the target, renamed over it (`os.replace` is atomic on POSIX and Windows) only once
complete, so a reader sees the old file or the new one, never a part."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

# Temporary names unique over threads (the counter), processes (the pid) and machines sharing a
# folder (the token): O_EXCL then never meets another writer's file.
_TOKEN = os.urandom(4).hex()
_COUNT = itertools.count()


def _create_temp(folder: str, name: str, mode: int) -> tuple[int, str]:
    """Open a new temporary file in `folder` for `name`. `os.open` applies the user's umask to
    `mode` as `open()` does (mkstemp would make every file 0600, unreadable to the user's group)."""
    tmp = os.path.join(folder, f".{name}.{_TOKEN}{os.getpid()}-{next(_COUNT)}.tmp")
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode), tmp


def _discard(tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


def write_all(fd: int, data: bytes) -> None:
    """os.write until all of `data` is written (a regular file takes less only when full)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_whole(fd: int, data: bytes) -> None:
    """Append `data` (whole lines) to `fd`, a file opened with O_APPEND. A write that fails part-way
    (a full disk) is cut off again before the error is raised, so the file never keeps a torn last
    line: it goes back to its size before, unless another writer appended after the part (then
    the part stays, and readers skip it as the torn line of a killed writer)."""
    before = os.fstat(fd).st_size
    written = 0
    view = memoryview(data)
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
    except OSError:
        if written:
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size == before + written:
                    os.ftruncate(fd, before)
        raise


def fsync_folder(path: str | os.PathLike[str]) -> None:
    """Make a folder's entries (new names, renames) durable; a no-op where folders cannot be
    opened (Windows)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(folder: str, name: str, data: bytes, *, sync: bool = True, mode: int = 0o666) -> None:
    """Replace the regular file `folder/name` with `data` atomically, in the fewest system calls
    (the result store's path: one open, write, optional fsync, close and rename). `sync` fsyncs
    the data before the rename; making the rename itself durable is `fsync_folder`'s job. Unlike
    `open_atomic` it neither follows symbolic links nor writes devices in place: the store owns
    its folder."""
    fd, tmp = _create_temp(folder, name, mode)
    try:
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(folder, name))
    except BaseException:
        _discard(tmp)
        raise


@contextlib.contextmanager
def open_atomic(path: Path, mode: int = 0o666, *, binary: bool = False, fsync: bool = True) -> Iterator[IO[Any]]:
    """Stream into `path`: the data goes to a temp file beside it, which replaces `path` only when
    the block ends without an error, so a crash or a failed render never leaves half a file in
    place of a good one. The file gets `mode` less the user's umask, as `open()` would create it.
    A symbolic link is followed (the file it points to is replaced, the link stays); a path that
    is not a regular file (a device such as /dev/stdout, a FIFO) is written in place, never
    replaced."""
    path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        if path.is_dir():
            raise IsADirectoryError(21, "it is a directory", str(path))
        device: IO[Any] = open(path, "wb") if binary else open(path, "w", encoding="utf-8")  # noqa: SIM115
        with device:
            yield device
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(str(path.parent), path.name, mode)
    try:
        fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def write_atomic(path: Path, text: str | bytes, mode: int = 0o666) -> None:
    """Write `text` to `path` atomically and durably (fsync before the rename), with `mode` less
    the user's umask."""
    with open_atomic(path, mode, binary=True) as fh:
        fh.write(text.encode() if isinstance(text, str) else text)
