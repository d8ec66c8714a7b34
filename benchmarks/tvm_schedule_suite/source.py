"""TVM's test files, read from the user's checkout or git directory at run time.

``tvm`` is a source checkout (``<tvm>/tests/python/tir-schedule`` exists) or a git
directory (bare, a mirror, or a checkout's ``.git``); with ``ref`` the files are read
from that commit or tag with ``git show``, else from the work tree.

Example::

    >>> static_cases("import pytest\\n@pytest.mark.parametrize('x', [1, 2])\\n"
    ...              "def test_a(x):\\n    pass\\ndef test_b():\\n    pass\\n")
    3
"""

from __future__ import annotations

import ast
import os
import subprocess

#: where the schedule tests live inside a TVM source tree
SUITE_DIR = "tests/python/tir-schedule"


class SourceError(Exception):
    """The TVM checkout or git directory cannot be read."""


def _git(git_dir: str, *args) -> str:
    try:
        out = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True,
                             text=True, check=False)
    except FileNotFoundError:
        raise SourceError("git is not installed; pass a TVM source checkout") from None
    if out.returncode != 0:
        raise SourceError(f"git {' '.join(args)} in {git_dir}: {out.stderr.strip()}")
    return out.stdout


def _git_dir(path: str) -> str | None:
    if os.path.isdir(os.path.join(path, ".git")):
        return os.path.join(path, ".git")
    if os.path.isfile(os.path.join(path, "HEAD")) and \
            os.path.isdir(os.path.join(path, "objects")):
        return path
    return None


def read_tests(tvm: str, ref: str | None = None, only=None) -> dict:
    """``{file name: source}`` of the ``test_*.py`` files of TVM's schedule suite.

    ``only`` (names or name fragments) keeps the files containing one of them.
    """
    if not os.path.isdir(tvm):
        raise SourceError(f"{tvm} is not a directory: pass a TVM source checkout or git "
                          "directory")
    work = os.path.join(tvm, SUITE_DIR)
    git_dir = _git_dir(tvm)
    if ref is None and not os.path.isdir(work):
        if git_dir is None:
            raise SourceError(f"{work} does not exist and {tvm} is not a git directory")
        ref = "v0.23.0"
    files = {}
    if ref is None:
        for name in sorted(os.listdir(work)):
            if name.startswith("test_") and name.endswith(".py"):
                with open(os.path.join(work, name)) as f:
                    files[name] = f.read()
    else:
        if git_dir is None:
            raise SourceError(f"--ref needs a git directory; {tvm} has none")
        rev = _resolve(git_dir, ref)
        for name in _git(git_dir, "ls-tree", "--name-only", f"{rev}:{SUITE_DIR}").split():
            if name.startswith("test_") and name.endswith(".py"):
                files[name] = _git(git_dir, "show", f"{rev}:{SUITE_DIR}/{name}")
    if only:
        files = {n: s for n, s in files.items() if any(o in n for o in only)}
    if not files:
        raise SourceError(f"no test files found in {tvm} ({ref or 'work tree'})")
    return files


def read_files(tvm: str, paths, ref: str | None = None) -> dict:
    """``{file name: source}`` of the files at ``paths`` (relative to a TVM source
    tree) read from the checkout's work tree, or with ``ref`` (or from a git
    directory without a work tree: ``v0.23.0``) from that commit; a missing file is
    a :class:`SourceError`.

    Example::

        >>> read_files("/nonexistent", ["tests/python/x.py"])
        Traceback (most recent call last):
        ...
        benchmarks.tvm_schedule_suite.source.SourceError: /nonexistent is not a directory: pass a TVM source checkout or git directory
    """
    if not os.path.isdir(tvm):
        raise SourceError(f"{tvm} is not a directory: pass a TVM source checkout or git "
                          "directory")
    git_dir = _git_dir(tvm)
    if ref is None and not all(os.path.isfile(os.path.join(tvm, p)) for p in paths):
        if git_dir is None:
            missing = next(p for p in paths if not os.path.isfile(os.path.join(tvm, p)))
            raise SourceError(f"{os.path.join(tvm, missing)} does not exist and {tvm} is "
                              "not a git directory")
        ref = "v0.23.0"
    files = {}
    rev = _resolve(git_dir, ref) if ref is not None else None
    for path in paths:
        if rev is None:
            with open(os.path.join(tvm, path)) as f:
                files[os.path.basename(path)] = f.read()
        else:
            files[os.path.basename(path)] = _git(git_dir, "show", f"{rev}:{path}")
    return files


def _resolve(git_dir: str, ref: str) -> str:
    # a tag and a branch may share a name (mirrors have both): prefer the tag
    for candidate in (f"refs/tags/{ref}", ref):
        try:
            return _git(git_dir, "rev-parse", "--verify", "--quiet",
                        f"{candidate}^{{commit}}").strip()
        except SourceError:
            continue
    raise SourceError(f"{ref} is not a commit, tag or branch of {git_dir}")


def static_cases(source: str) -> int:
    """How many cases pytest would collect from ``source``, counted without importing
    it (test functions and methods, times their literal ``parametrize`` lists)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    total = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name.startswith("test"):
            n = 1
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "parametrize" \
                        and len(d.args) >= 2 and isinstance(d.args[1], (ast.List, ast.Tuple)):
                    n *= max(1, len(d.args[1].elts))
            total += n
    return total


__all__ = ["read_files", "read_tests", "static_cases", "SourceError", "SUITE_DIR"]
