"""Where a report goes: stdout, a device or FIFO as it is, or a regular file replaced atomically
at the end. Every error is a `ReportError` naming the reporter and the file."""

from __future__ import annotations

import os
from pathlib import Path

from agent_health.files import lock_as_writer, remove_stale_temps
from agent_health.reporters.base import ReportError, write_stdout


class ReportOutput:
    """A report's destination: stdout, a device or FIFO as it is, or a regular file replaced
    atomically at the end (`atomic`) or written in place."""

    def __init__(self, reporter: str, path: str | None, atomic: bool):
        self.reporter = reporter
        self.path = Path(path) if path else None
        self.atomic = atomic
        self._fd: int | None = None
        self._tmp: Path | None = None

    def _fail(self, exc: OSError) -> ReportError:
        why = exc.strerror or str(exc)
        return ReportError(f"--reporter {self.reporter}: cannot write {self.path}: {why}")

    def open(self) -> None:
        if self.path is None:
            return
        try:
            if self.path.is_dir():
                raise IsADirectoryError(21, "it is a directory")
            target = self.path
            if self.atomic and (not self.path.exists() or self.path.is_file()):
                remove_stale_temps(self.path)  # left by a run killed while writing this report
                self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                target = self._tmp
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(target, flags, 0o666)  # the user's umask decides the mode
            if self._tmp is not None:
                lock_as_writer(self._fd)  # until closed: the next run can tell it is being written
        except OSError as exc:
            raise self._fail(exc) from None

    def write(self, text: str) -> None:
        if self.path is None:
            write_stdout(text)
            return
        if self._fd is None:
            return
        data = text.encode()
        try:
            while data:  # one write() per call for a regular file; loop only on a short write
                data = data[os.write(self._fd, data) :]
        except OSError as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.close(fd)
            if self._tmp is not None and self.path is not None:
                os.replace(self._tmp, self.path)
        except OSError as exc:
            raise self._fail(exc) from None

    def discard(self) -> None:
        """Give up (after an error): close and remove the temporary file."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
