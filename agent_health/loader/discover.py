"""Finding eval files under files and directories, and loading them all."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from agent_health.errors import EvalFileError
from agent_health.lazy import deferred
from agent_health.loader.code import load_code_file
from agent_health.loader.ids import CODE_SUFFIX, DATA_SUFFIXES, suite_name
from agent_health.loader.types import LoadedTest, LoadResult

if TYPE_CHECKING:
    import agent_health.loader.data as data_files
else:  # data files only: the YAML parser and the data formats load when one is found
    data_files = deferred("agent_health.loader.data")

_SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".venv", "venv"}


def is_eval_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(CODE_SUFFIX) or path.suffix.lower() in DATA_SUFFIXES


def unsupported(path: Path) -> str:
    """Why a file named on its own is not loaded: its type, and the types that are."""
    kinds = ", ".join(f"*{s}" for s in (CODE_SUFFIX, *DATA_SUFFIXES))
    hint = " (a Python eval file's name ends in .eval.py)" if path.suffix.lower() == ".py" else ""
    return f"unsupported file type {path.suffix or '(no extension)'!r}: eval files are {kinds}{hint}"


def discover(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[EvalFileError]]:
    """Eval files under the given paths, sorted, each once; missing paths are errors, and so is a
    file named on its own whose type no loader knows (never parsed as some other format)."""
    found: dict[Path, None] = {}
    errors: list[EvalFileError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            if not is_eval_file(path):
                errors.append(EvalFileError(str(raw), unsupported(path)))
                continue
            found[path.resolve()] = None
        elif path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
                for f in sorted(filenames):
                    p = Path(dirpath, f)
                    if is_eval_file(p):
                        found[p.resolve()] = None
        else:
            errors.append(EvalFileError(str(raw), "no such file or directory"))
    return sorted(found), errors


def _root_for(paths: list[Path], explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit.resolve()
    if not paths:
        return Path.cwd()
    dirs = [p if p.is_dir() else p.parent for p in paths]
    return Path(os.path.commonpath([str(d.resolve()) for d in dirs]))


def load_tests(paths: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str] | None = None) -> LoadResult:
    """Load every eval file under `paths`. Suites are named relative to `root` (default: the
    common folder of the paths). A file that fails to load is an error; the others still load."""
    given = [Path(p) for p in paths]
    files, errors = discover(given)
    base = _root_for(given, Path(root) if root else None)
    result = LoadResult(errors=errors, root=str(base))
    for file in files:
        try:
            rel = file.relative_to(base).as_posix()
        except ValueError:
            rel = file.name
        result.files.append(rel)
        try:
            if file.name.lower().endswith(CODE_SUFFIX):
                loader = load_code_file
            else:
                loader = data_files.load_data_file
            tests, file_errors = loader(file, rel)
        except EvalFileError as exc:
            result.errors.append(exc)
            continue
        except OSError as exc:
            result.errors.append(EvalFileError(rel, f"cannot read: {exc.strerror or exc}"))
            continue
        except Exception as exc:  # a loader bug must not take the other files down with it  # noqa: BLE001
            result.errors.append(EvalFileError(rel, f"cannot load: {type(exc).__name__}: {exc}"))
            continue
        result.tests.extend(tests)
        result.errors.extend(file_errors)
    _drop_shared_ids(result)
    return result


def merge_loaded(parts: Iterable[LoadResult], root: str) -> LoadResult:
    """One LoadResult of files loaded one by one (each its own `load_tests`), as `load_tests`
    would give for them all: a test id that several of them define is a load error naming every
    file, and none of those tests is kept. The parts are not changed."""
    result = LoadResult(root=root)
    for part in parts:
        result.tests.extend(part.tests)
        result.errors.extend(part.errors)
        result.files.extend(part.files)
    _drop_shared_ids(result)
    return result


def _drop_shared_ids(result: LoadResult) -> None:
    """A test id defined by more than one file (`smoke.json`, `smoke.yaml` and `smoke.eval.py` are
    one suite) is a load error naming every file; none of them runs, so no file's result replaces
    another's under the one id.

    An id starts with its suite, so only files of one suite can share one: the tests of the other
    suites are not looked at (a suite of 50,000 tests in one file would otherwise build a list per
    test, 130 bytes a test, at the peak of its loading)."""
    files = Counter(suite_name(rel) for rel in result.files)
    crowded = {suite for suite, count in files.items() if count > 1}
    if not crowded:
        return
    by_id: dict[str, list[LoadedTest]] = {}
    for t in result.tests:
        if t.case.suite in crowded:
            by_id.setdefault(t.case.id, []).append(t)
    shared = {tid: ts for tid, ts in by_id.items() if len(ts) > 1}
    if not shared:
        return
    result.tests = [t for t in result.tests if t.case.id not in shared]
    for tid, ts in shared.items():
        where = ", ".join(f"{t.case.source_file}:{t.case.line}" if t.case.line else t.case.source_file for t in ts)
        first = ts[0].case
        result.errors.append(
            EvalFileError(
                first.source_file,
                f"test id {tid!r} is defined in {len(ts)} files ({where}); files that differ only in their "
                "extension are one suite: rename the test or the file",
                first.line,
            )
        )
