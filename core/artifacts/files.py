"""The file system side of a repair, for every format: checked paths, a hidden staging folder beside ``--out``, a move
that never replaces, modes kept."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator

from ..errors import ArgumentError

__all__ = [
    "checked_paths",
    "copy_tree",
    "keep_mode",
    "publish",
    "remove_paths",
    "staging",
]


def checked_paths(served: str, out: str) -> tuple[str, str]:
    """``(served, out)`` made absolute, after refusing what would touch the original or an existing path."""
    if os.path.islink(served):
        raise ArgumentError("served", f"{served} is a symlink; give the artifact itself")
    if not os.path.exists(served):
        raise ArgumentError("served", f"{served}: no such file or directory")
    if os.path.lexists(out):
        raise ArgumentError("out", f"{out} exists; repair never overwrites: give a new path")
    parent = os.path.dirname(os.path.abspath(out)) or "."
    if not os.path.isdir(parent):
        raise ArgumentError("out", f"{parent} is not a directory")
    real_served, real_out = os.path.realpath(served), os.path.join(os.path.realpath(parent), os.path.basename(out))
    if real_out == real_served or real_out.startswith(real_served.rstrip(os.sep) + os.sep):
        raise ArgumentError("out", f"{out} is inside the artifact {served}; write the copy elsewhere")
    if os.path.isdir(served):
        for folder, folders, files in os.walk(served):
            for name in (*folders, *files):
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    raise ArgumentError("served", f"{path} is a symlink; give a pack of plain files and folders")
                if not (os.path.isdir(path) or stat.S_ISREG(os.stat(path).st_mode)):
                    raise ArgumentError("served", f"{path} is not a regular file or folder; give a pack of plain "
                                        "files and folders")
    else:
        suffix = os.path.splitext(served)[1].lower()
        if os.path.splitext(out)[1].lower() != suffix:
            raise ArgumentError("out", f"{out}: the copy of {served} must end in {suffix or 'the same suffix'} "
                                "(ropekit tells an artifact's format by its suffix)")
    return served, out


@contextlib.contextmanager
def staging(target: str) -> Iterator[str]:
    """A hidden temporary folder beside ``target``, removed whatever happens (after a successful
    move it holds only the claims the move replaced)."""
    parent = os.path.dirname(os.path.abspath(target))
    work = tempfile.mkdtemp(prefix=".ropekit-repair-", dir=parent)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def publish(moves: list[tuple[str, str]]) -> None:
    """Move each staged path onto its target without ever replacing what someone else put there:
    every target name is claimed first (``O_EXCL`` for a file, ``mkdir`` for a folder), then the
    staged path is renamed over its own claim. On failure nothing of ours is left."""
    claimed: list[str] = []
    try:
        for staged, target in moves:
            if os.path.isdir(staged):
                os.mkdir(target)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            claimed.append(target)
    except FileExistsError:
        remove_paths(claimed, moved=False)
        raise ArgumentError("out", f"{moves[len(claimed)][1]} appeared while the copy was written; repair never "
                            "overwrites: nothing was written") from None
    except OSError:
        remove_paths(claimed, moved=False)
        raise
    done: list[str] = []
    try:
        for staged, target in moves:
            os.replace(staged, target)  # onto our own claim (an empty folder is replaced too)
            done.append(target)
    except OSError:
        remove_paths(done, moved=True)
        remove_paths([path for path in claimed if path not in done], moved=False)
        raise


def remove_paths(paths: list[str], *, moved: bool) -> None:
    """Remove what this process put at ``paths``: a claim (an empty folder, an empty file) or,
    once ``moved``, the copy itself."""
    for path in paths:
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                if moved:
                    shutil.rmtree(path)
                else:
                    os.rmdir(path)
            else:
                os.unlink(path)


def keep_mode(original: str, copy: str) -> None:
    """``copy`` gets ``original``'s permission bits (the writers create files 0600 or by umask)."""
    if os.path.isfile(original) and os.path.isfile(copy):
        os.chmod(copy, stat.S_IMODE(os.stat(original).st_mode))


def copy_tree(source: str, target: str) -> None:
    """``source``'s folders and files under ``target`` (an error is the first ``OSError`` itself)."""
    for folder, _, files in os.walk(source):
        destination = os.path.join(target, os.path.relpath(folder, source))
        os.makedirs(destination, exist_ok=True)
        for name in files:
            shutil.copy2(os.path.join(folder, name), os.path.join(destination, name))
