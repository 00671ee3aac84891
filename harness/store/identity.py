"""Which code made an index (its contents depend on it: a change rebuilds it), and this user's key for its keyed
hash."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import secrets
from pathlib import Path

from harness.record.files import stage
from harness.record.model import SCHEMA_VERSION, source_digest
from harness.store.layout import INDEX_FORMAT

PROJECT = Path(__file__).resolve().parents[2]  # the checkout: harness/ and gpt/


def identity_files(root: Path = PROJECT) -> list[Path]:
    """Every file an indexed record's outcome and value depend on: all of harness/record/ (its modules and the data
    they read: the schema, the workload-code history) and of harness/store/ (the index's own code), and each module of
    this project that those modules import, directly or not (gpt/config.py's bounds decide validity), found by reading
    their imports."""
    files = {p for package in ("record", "store") for p in (root / "harness" / package).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    todo = [p for p in files if p.suffix == ".py"]
    while todo:
        for node in ast.walk(ast.parse(todo.pop().read_bytes())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                if name.split(".")[0] not in ("harness", "gpt"):
                    continue
                base = root.joinpath(*name.split("."))
                for module in (base.with_suffix(".py"), base / "__init__.py"):
                    if module.is_file() and module not in files:
                        files.add(module)
                        todo.append(module)
    return sorted(files)


def code_identity(root: Path = PROJECT) -> str:
    """What the index's contents depend on: its own format, the schema version, and every identity_files() file by
    its path and bytes. A change to any of them rebuilds the index: a warm compare reads as --no-index does."""
    files = ((path.relative_to(root).as_posix(), path.read_bytes()) for path in identity_files(root))
    return source_digest(files, hashlib.sha256(f"{INDEX_FORMAT}:{SCHEMA_VERSION}".encode())).hexdigest()


def _key_file() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpt-harness" / "index-key"


def user_key() -> bytes:
    """This user's key for the index's keyed hash, made once (mode 0600; linked into place whole)."""
    path = _key_file()
    with contextlib.suppress(FileNotFoundError):
        key = path.read_bytes()
        if len(key) == 32:
            return key
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = stage(path, secrets.token_bytes(32), mode=0o600)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    key = path.read_bytes()
    if len(key) != 32:
        raise OSError(f"{path}: not a key (delete it)")
    return key
