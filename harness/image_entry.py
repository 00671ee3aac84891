"""The env images' entrypoint: `python -m harness.image_entry ARGS` checks that the records will outlive the
container, then becomes `python -m harness.run ARGS` (exec: same process, so signals reach the runner as before).

A plain `docker run --gpus all envs/nightly` mounts nothing at /results: the records would land in the container's
own layer (or, with a VOLUME, an anonymous volume that `--rm` deletes) and vanish. So unless --out lies in a folder
mounted from outside (a bind mount or a named volume), it refuses with one line saying how to mount one.
HARNESS_RECORDS_IN_CONTAINER=1 runs anyway, saying first where the records stay (for `docker cp`).
Stdlib only: it runs before anything else in the image.
"""

from __future__ import annotations

import os
import re
import sys

KEEP_VAR = "HARNESS_RECORDS_IN_CONTAINER"
REFUSED_EXIT = 2
# Docker's and Podman's anonymous volumes: <root>/volumes/<64 hex>/_data (a named volume has its name there).
ANONYMOUS_VOLUME = re.compile(r"/volumes/[0-9a-f]{64}/_data\Z")


def out_dir(argv: list[str]) -> str | None:
    """The last --out given (argparse keeps the last: the user's own --out after the image's)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--out" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--out="):
            found = arg.split("=", 1)[1]
    return found


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts(mountinfo: str) -> dict[str, str]:
    """{mount point: root of the mounted source} from /proc/self/mountinfo (later mounts win)."""
    out = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            out[_unescape(fields[4])] = _unescape(fields[3])
    return out


def holding_mount(path: str, table: dict[str, str]) -> tuple[str, str]:
    """(mount point, source root) of the mount that holds path: the longest mount point above it."""
    path = os.path.normpath(os.path.join("/", path))
    best = "/"
    for point in table:
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best = point
    return best, table.get(best, "/")


def problem(out: str, mountinfo: str) -> str | None:
    """Why records written to `out` would vanish with the container, or None when a mount keeps them."""
    point, root = holding_mount(out, mounts(mountinfo))
    if point == "/":
        return f"--out {out} is not in a mounted folder: the records would vanish with the container"
    if ANONYMOUS_VOLUME.search(root):
        return f"--out {out} is in an anonymous volume ({point}): the records would vanish with it (docker run --rm)"
    return None


def refusal(reason: str, image: str) -> str:
    return (f"{image}: {reason}. Mount a folder: docker run [--gpus all] -v \"$PWD/results/runs:/results\" "
            f"-v /etc/machine-id:/etc/machine-id:ro {image} [ARGS]  (or -e {KEEP_VAR}=1 to keep them inside)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    image = os.environ.get("HARNESS_IMAGE") or "this image"
    out = out_dir(argv)
    if out is not None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8") as f:
                mountinfo = f.read()
        except OSError:
            mountinfo = None  # not Linux: nothing to judge, run as asked
        reason = problem(out, mountinfo) if mountinfo is not None else None
        if reason and os.environ.get(KEEP_VAR) != "1":
            print(refusal(reason, image), file=sys.stderr, flush=True)
            return REFUSED_EXIT
        if reason:
            print(f"WARNING {image}: {reason}; kept inside as {KEEP_VAR}=1 asks: docker cp CONTAINER:{out} .",
                  file=sys.stderr, flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "harness.run", *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
