"""Environment specs (envs/<name>/env.yaml): load, validate, install, check, bump.

python -m harness.envs ...
  list                          the specs, one line each
  show NAME                     one spec as JSON
  get NAME FIELD                one field (e.g. python), printed bare
  install-args NAME             the pip/uv arguments that install the env's torch (one per line)
  pins NAME                     the extra pins (one per line)
  probe NAME                    is the env's index reachable? (exit 1 with one line if not)
  install NAME --venv DIR       create DIR with the spec's Python, install torch + the project (Docker uses it)
  check NAME                    inside the env: does the imported torch match the spec? (one-line error if not)
  missing-deps                  the project's dependencies this interpreter lacks (one per line)
  bump-nightly [--date YYYYMMDD]  rewrite envs/nightly/env.yaml to a build on the nightly index
  verify-matrix DIR NAME...     records in DIR exist for each NAME with the spec's torch version and CUDA
    [--container]               ...and each was made in the image envs/NAME, whose digest it carries
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

from harness import argtypes
from harness.envs.install import effective_index, install, install_args, probe_index
from harness.envs.nightly import bump_nightly
from harness.envs.pins import check_current, missing_dependencies, project_dependencies
from harness.envs.spec import FIELDS, NIGHTLY, ROOT, SpecError, load_spec, load_specs


def _fail(message: str, code: int = 1):
    print(message, file=sys.stderr)
    sys.exit(code)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.envs", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the specs, one line each")
    for cmd in ("show", "install-args", "pins", "probe", "check"):
        sub.add_parser(cmd).add_argument("name")
    get = sub.add_parser("get", help="one field of a spec")
    get.add_argument("name")
    get.add_argument("field", choices=FIELDS)
    inst = sub.add_parser("install", help="create a venv with the spec's Python, torch and the project")
    inst.add_argument("name")
    inst.add_argument("--venv", type=argtypes.path_arg, required=True, help="the venv to create (DIR)")
    inst.add_argument("--project", type=argtypes.path_arg, default=ROOT,
                      help="the harness checkout installed into it (default: this one)")
    inst.add_argument("--editable", action="store_true", help="install the project editable (pip -e)")
    sub.add_parser("missing-deps", help="project dependencies this interpreter lacks")
    bump = sub.add_parser("bump-nightly", help="rewrite envs/nightly/env.yaml to a build on the nightly index")
    bump.add_argument("--date", help="YYYYMMDD (default: the newest build)")
    verify = sub.add_parser("verify-matrix", help="records in DIR show each env's pinned torch")
    verify.add_argument("dir", type=argtypes.path_arg)
    verify.add_argument("names", nargs="+")
    verify.add_argument("--container", action="store_true",
                        help="also: every record was made inside image envs/NAME and carries its digest")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)

    try:
        if args.cmd == "list":
            specs, errors = load_specs()
            for name in sorted({*specs, *errors}):
                if name in errors:  # named with its error; the others are still listed
                    print(f"{name:10} invalid: {errors[name]}")
                    continue
                spec = specs[name]
                torch = f"torch {spec.torch} (CUDA {spec.cuda or 'cpu'})" if spec.installs else "interpreter's torch"
                index = effective_index(spec) or "default index"
                print(f"{spec.name:10} {torch:38} python {spec.python or '-':5} {index}")
            if errors:
                return 1
        elif args.cmd == "show":
            print(json.dumps(load_spec(args.name).to_dict(), indent=1))
        elif args.cmd == "get":
            value = getattr(load_spec(args.name), args.field)
            print(" ".join(value) if isinstance(value, tuple) else ("" if value is None else value))
        elif args.cmd == "install-args":
            print("\n".join(install_args(load_spec(args.name))))
        elif args.cmd == "pins":
            print("\n".join(load_spec(args.name).extra_pins))
        elif args.cmd == "probe":
            spec = load_spec(args.name)
            error = probe_index(spec)
            if error:
                _fail(error)
            print(f"{spec.name}: {effective_index(spec) or 'default index (not probed)'} ok")
        elif args.cmd == "install":
            install(load_spec(args.name), args.venv, args.project, args.editable)
        elif args.cmd == "check":
            spec = load_spec(args.name)
            error, summary = check_current(spec)
            if error:
                _fail(error)
            print(summary + ("" if spec.installs else " (local: not checked against a pin)"))
        elif args.cmd == "missing-deps":
            print("\n".join(missing_dependencies(project_dependencies())))
        elif args.cmd == "bump-nightly":
            if args.date and not re.fullmatch(r"\d{8}", args.date):
                _fail(f"--date {args.date!r}: expected YYYYMMDD")
            old, new = bump_nightly(args.date)
            print(f"{NIGHTLY}: torch {old} -> {new} in {load_spec(NIGHTLY).path}")
        elif args.cmd == "verify-matrix":
            from harness.console.textsafe import one_line, terminal  # what records hold: no escapes, no forged line
            from harness.envs.verify import verify_matrix  # reads records: not needed by the Docker bootstrap

            problems, lines = verify_matrix(args.dir, args.names, container=args.container,
                                            warn=lambda line: print(one_line(line), file=sys.stderr))
            print(terminal("\n".join(lines)))
            if problems:
                _fail(terminal("\n".join(problems)))
    except SpecError as exc:
        _fail(str(exc))
    except subprocess.CalledProcessError as exc:
        _fail(f"command failed (exit {exc.returncode}): {' '.join(map(str, exc.cmd))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
