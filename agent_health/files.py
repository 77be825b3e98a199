"""Atomic file writes with the user's umask (the bottom layer: stores, reports and recordings use it).

A crash never leaves a half-written file in place of a good one: data goes to a temporary file
beside the target, renamed over it (`os.replace` is atomic on POSIX and Windows) only once
complete, so a reader sees the old file or the new one, never a part.

A report's temporary file is locked by its writer (`flock`, released by the kernel whatever ends
the process), so `remove_stale_temps` can tell the temporary file of a writer killed with SIGKILL
from one still being written, and the next run writing the same report removes the first kind."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

try:
    import fcntl
except ImportError:  # Windows: temporary files are not locked, nor removed by the next writer
    fcntl = None  # type: ignore[assignment]

# Temporary names unique over threads (the counter), processes (the pid) and machines sharing a
# folder (the token): O_EXCL then never meets another writer's file.
_TOKEN = os.urandom(4).hex()
_COUNT = itertools.count()


def _create_temp(folder: str, name: str, mode: int) -> tuple[int, str]:
    """Open a new temporary file in `folder` for `name`. `os.open` applies the user's umask to
    `mode` as `open()` does (mkstemp would make every file 0600, unreadable to the user's group)."""
    tmp = os.path.join(folder, f".{name}.{_TOKEN}{os.getpid()}-{next(_COUNT)}.tmp")
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode), tmp


_STALE_AFTER_S = 2.0  # a temporary file younger than this may not be locked by its writer yet


def lock_as_writer(fd: int) -> None:
    """Mark `fd` (a temporary file) as being written by this process until it is closed."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temporary files of `path` (`.NAME.*.tmp` beside it) whose writer is gone: no
    process holds their lock, they are older than a moment and, when their name gives only a
    process id, that process is gone. Returns what was removed (nothing where files cannot be
    locked, on Windows)."""
    if fcntl is None:
        return []
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:(?P<pid>\d+)|[0-9a-f]{{8}}\d+-\d+)\.tmp")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            if time.time() - entry.stat(follow_symlinks=False).st_mtime < _STALE_AFTER_S:
                continue
            if match["pid"] and _pid_alive(int(match["pid"])):
                continue
            fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live writer: not stale
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


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


def write_temp(folder: str, name: str, data: bytes, *, sync: bool = True, mode: int = 0o666) -> str:
    """`data` in a new temporary file for `folder/name`, fsynced when `sync`; its path, for the
    caller to rename over `name` (`os.replace`) or `discard`. Nothing is left when it fails."""
    fd, tmp = _create_temp(folder, name, mode)
    try:
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        discard(tmp)
        raise
    return tmp


def discard(tmp: str) -> None:
    """Remove a temporary file that will not be renamed into place (gone already: nothing to do;
    a failure to remove it must not hide the error that made it useless)."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def cut_back(path: str, before: int, length: int) -> bool:
    """Take back the `length` bytes appended to `path` at offset `before`, if they are still its
    last ones; False when they stay (another writer appended after them, and a reader keeps them)."""
    try:
        if os.stat(path).st_size == before + length:
            os.truncate(path, before)
            return True
    except OSError:
        pass
    return False


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
    lock_as_writer(fd)
    try:
        fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def write_atomic(path: Path, text: str | bytes, mode: int = 0o666) -> None:
    """Write `text` to `path` atomically and durably (fsync before the rename), with `mode` less
    the user's umask."""
    with open_atomic(path, mode, binary=True) as fh:
        fh.write(text.encode() if isinstance(text, str) else text)


def create_file(folder: str, name: str, data: bytes, *, mode: int = 0o666) -> bool:
    """Write `folder/name` whole only if no such file exists; False when one does (another writer
    won and its file stays). The data goes to a temporary file first, then is hard-linked into
    place, so a reader never sees part of it and two writers never interleave. Where hard links
    are not supported, the temporary file is renamed over `name` instead (the last writer wins)."""
    fd, tmp = _create_temp(folder, name, mode)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        target = os.path.join(folder, name)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links (FAT, some network shares)
            if os.path.exists(target):
                return False
            os.replace(tmp, target)
            return True
        return True
    finally:
        discard(tmp)


_NAME_SAFE = "-_.~"  # never escaped in a name: what every filesystem and object store takes as is
_MAX_NAME = 200  # bytes: under every filesystem's 255, with room for an extension


def safe_name(text: str) -> str:
    """A file or object name for `text` that is distinct for distinct texts: letters, digits and
    `-_.~` stay, anything else is %-escaped (a SHA-256 hex digest stays unchanged), "." and ".."
    never name a folder, and a name past 200 bytes becomes `=sha256-<digest>` ('=' is always
    escaped in the other form, so the two never meet)."""
    name = quote(text, safe=_NAME_SAFE)
    if not name.strip("."):  # "", ".", "..": escaped so they name a file, never a folder
        name = name.replace(".", "%2E") or "%"
    if len(name) > _MAX_NAME:
        name = "=sha256-" + hashlib.sha256(text.encode()).hexdigest()
    return name
