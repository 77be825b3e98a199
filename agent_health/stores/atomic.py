"""Atomic file writes: a crash never leaves a half-written file in place of a good one."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

# Temporary names unique over threads (the counter), processes (the pid) and machines sharing a
# folder (the token): O_EXCL then never meets another writer's file.
_TOKEN = os.urandom(4).hex()
_COUNT = itertools.count()


def write_all(fd: int, data: bytes) -> None:
    """os.write until all of `data` is written (a regular file takes less only when full)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
    """Write `folder/name` through a temporary file in `folder` renamed over it (`os.replace` is
    atomic on POSIX and Windows): readers see the old file or the new one, never a part. `sync`
    fsyncs the data before the rename; making the rename itself durable is `fsync_folder`'s job.
    The file gets `mode` less the user's umask, as `open()` creates files."""
    tmp = os.path.join(folder, f".{name}.{_TOKEN}{os.getpid()}-{next(_COUNT)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode)
    try:
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(folder, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_atomic(path: Path, text: str | bytes, mode: int = 0o666) -> None:
    """Create `path`'s folder if needed, then write `path` atomically and fsync it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    replace_file(str(path.parent), path.name, data, mode=mode)
