"""Atomic file writes with the user's umask (the bottom layer: stores, reports and recordings use it).

A crash never leaves a half-written file in place of a good one."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where Linux shows it (/proc/self/status);
    elsewhere os.umask must set it to read it, so that is done under a lock, for the shortest time."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


@contextlib.contextmanager
def open_atomic(path: Path, mode: int = 0o666, *, binary: bool = False, fsync: bool = True) -> Iterator[IO[Any]]:
    """Stream into `path`: the data goes to a temp file beside it, which replaces `path` only when
    the block ends without an error, so a crash or a failed render never leaves half a file in
    place of a good one. The file gets `mode` less the user's umask, as `open()` would create it
    (mkstemp alone makes every file 0600, unreadable to the user's group). A symbolic link is
    followed (the file it points to is replaced, the link stays); a path that is not a regular
    file (a device such as /dev/stdout, a FIFO) is written in place, never replaced."""
    path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        if path.is_dir():
            raise IsADirectoryError(21, "it is a directory", str(path))
        device: IO[Any] = open(path, "wb") if binary else open(path, "w", encoding="utf-8")  # noqa: SIM115
        with device:
            yield device
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode & ~current_umask())
        fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, text: str | bytes, mode: int = 0o666) -> None:
    """Write `text` to `path` atomically and durably (fsync before the rename), with `mode` less
    the user's umask."""
    with open_atomic(path, mode, binary=True) as fh:
        fh.write(text.encode() if isinstance(text, str) else text)
