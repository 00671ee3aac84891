"""The worker's contract: what crosses the process boundary from the launcher to one worker, typed.

The launcher (harness.runner.launcher) makes one `WorkerSpec` per point and writes it as JSON (`to_json`); the worker
(`python -m harness.lifeline harness.worker SPEC.json`) reads it back (`from_json`). Both sides start their
record from it (`new_record`): the worker for its measurement, the launcher for a worker that died without
writing one. Nothing else travels: the runner's pid goes in the worker's environment (harness.lifeline).
No torch import.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields

from harness.provenance.workload_code import identity as workload_code
from harness.record.model import new_record


class WorkerSpecError(ValueError):
    """A spec file that is not a WorkerSpec (a launcher and a worker from different code)."""


@dataclass(frozen=True)
class WorkerSpec:
    """One measurement for one worker process: who it is (run id, env, plan, rung, repeat, sweep point), what
    it runs (the workload and the requested flags), where its record goes and the command that makes it again."""

    run_id: str
    env: str
    plan: str
    rung: str
    workload: dict  # gpt.config.WorkloadConfig.to_dict()
    flags: dict  # the requested flags (harness.runner.flags.FrozenFlags.to_dict())
    out: str = "."  # the folder the worker writes its record to
    rung_index: int | None = None
    repeat: int | None = None
    sweep: dict | None = None  # {name, field, value} of a sweep point
    rerun: str = ""  # the command that makes this measurement again (the record's rerun.command)
    threads: int | None = None  # --threads; None: the CPUs the worker may use
    invocation: str | None = None  # the launching process's invocation (harness.runner.launcher.invocation_id)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise WorkerSpecError(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise WorkerSpecError(f"expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in data]
        if unknown or missing:
            raise WorkerSpecError("; ".join(filter(None, [unknown and f"unknown field(s) {', '.join(unknown)}",
                                                          missing and f"missing field(s) {', '.join(missing)}"])))
        return cls(**data)

    def new_record(self, **fields_) -> dict:
        """The record this measurement starts as (harness.record.model.new_record, with this spec's identity,
        workload and requested flags (their hashes made there), the identity of the code that measures it
        (harness.provenance.workload_code: the worker and the launcher run the same checkout), and the rerun command);
        `fields_`: the rest (started_at, reason, environment, ...)."""
        return new_record(run_id=self.run_id, env=self.env, plan=self.plan, rung=self.rung, rung_index=self.rung_index,
                          repeat=self.repeat, invocation=self.invocation, sweep=self.sweep, workload=self.workload, flags_requested=self.flags,
                          workload_code=workload_code(), rerun_command=self.rerun, **fields_)
