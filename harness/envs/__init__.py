"""Environment specs (envs/<name>/env.yaml) and everything done with them; `python -m harness.envs` is the CLI.

    spec.py      EnvSpec; reading a spec with PyYAML, validating it, listing the specs
    install.py   the index an env installs from (mirror variables), pip/uv arguments, the index probe, install
    pins.py      does an environment match its spec: torch, CUDA variant, extra pins; missing project deps
    nightly.py   the nightly index's dated builds and bump-nightly
    verify.py    verify-matrix: the records of a matrix run show each env's pinned build
    __main__.py  the command line (argument parsing only)

No torch at import. The specs are YAML read by PyYAML: noxfile.py declares it in its inline script metadata
(nox installs it into its own environment when missing) and the Dockerfiles install python3-yaml before
their first `python3 -m harness.envs`.
"""
