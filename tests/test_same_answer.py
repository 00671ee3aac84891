"""Same records, same answer (issue 49): compare's answer is a function of the records' data alone.

The shipped records are copied twice: as they are, and with every env, device (GPU name, CPU model), run id, file and
folder renamed to names that sort the other way round (and the records' order on disk with them). compare's JSON on
the renamed copy, its names mapped back, must equal the original's byte for byte: no name orders a baseline, a row,
a pooled spread or a sum. A synthetic set built to sit on the boundary of a verdict (a delta whose interval nearly
touches 0) is held to the same, as is reading the same records in another order.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from records_factory import make_record, noisy_ms, write
from shipped import RESULTS

from harness import compare
from harness.analysis.dataset import load
from harness.record.io import iter_records
from harness.record.model import UNKNOWN_CODE, historic_workload_code

RECORD_FOLDERS = tuple(sorted(p.name for p in RESULTS.iterdir() if p.is_dir()))  # every shipped folder


def _records(folders) -> list[tuple[Path, Path, dict]]:
    """(folder, path relative to it, record) of every record under the folders, in no particular order."""
    out = []
    for folder in folders:
        for path, record in iter_records([folder], warn=lambda line: None):
            out.append((Path(folder), Path(path).relative_to(folder), record))
    return out


def _names(records) -> tuple[list, list, list]:
    envs = sorted({r["env"] for _f, _p, r in records if isinstance(r.get("env"), str)})
    devices = sorted({name for _f, _p, r in records for name in _device_names(r)})
    runs = sorted({r["run_id"] for _f, _p, r in records})
    return envs, devices, runs


def _device_names(record: dict) -> list[str]:
    env = record.get("environment") or {}
    return [x.get(k) for x, k in ((env.get("gpu") or {}, "name"), (env.get("cpu") or {}, "model")) if x.get(k)]


def _reversed(names: list[str], make) -> dict[str, str]:
    """Each name to a new one; the new names sort in the opposite order."""
    return {name: make(len(names) - i) for i, name in enumerate(names)}


def _rename(record: dict, envs: dict, devices: dict, runs: dict) -> dict:
    r = copy.deepcopy(record)
    if r.get("workload_code") in (None, UNKNOWN_CODE):  # what the run id would have found: the record's own fact
        r["workload_code"] = historic_workload_code(r["run_id"])
    r["run_id"] = runs[r["run_id"]]
    if r.get("env") in envs:
        r["env"] = envs[r["env"]]
    env = r.get("environment") or {}
    if env.get("env_name") in envs:
        env["env_name"] = envs[env["env_name"]]
    for part, key in (("gpu", "name"), ("cpu", "model")):
        if isinstance(env.get(part), dict) and env[part].get(key) in devices:
            env[part][key] = devices[env[part][key]]
    if isinstance(r.get("rerun"), dict) and isinstance(r["rerun"].get("command"), str):
        r["rerun"]["command"] = _substitute(r["rerun"]["command"], envs)
    return r


def _substitute(text: str, mapping: dict) -> str:
    """Every key of mapping (whole words, longest first) replaced by its value."""
    if not mapping:
        return text
    keys = sorted(mapping, key=len, reverse=True)
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(k)}(?![\w-])" for k in keys))
    return pattern.sub(lambda m: mapping[m.group(0)], text)


def _compare_json(paths, capsys) -> str:
    """What `python -m harness.compare PATHS --format json` prints."""
    capsys.readouterr()
    assert compare.main([*map(str, paths), "--format", "json", "--no-index"]) == 0
    return capsys.readouterr().out


def _same_answer_renamed(tmp_path: Path, folders, capsys) -> tuple[str, str]:
    records = _records(folders)
    env_names, device_names, run_ids = _names(records)
    envs = _reversed(env_names, lambda k: f"qqenv{k:03d}")
    # a device keeps its model in its name (a GPU's class names its datasheet peak and its match in a user's log):
    # a prefix renames it and turns its sort order around
    devices = {name: f"QQ{k:02d} {name}" for name, k in _reversed(device_names, lambda k: k).items()}
    runs = _reversed(run_ids, lambda k: f"qqrun{k:05d}")
    folder_names = _reversed(sorted({f.name for f, _p, _r in records}), lambda k: f"qqdir{k:03d}")
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, rel, record in records:
        (a / folder.name / rel).parent.mkdir(parents=True, exist_ok=True)
        (a / folder.name / rel).write_text(json.dumps(record))
    for folder, rel, record in reversed(records):  # written in the other order too
        target = b / folder_names[folder.name] / rel.parent / f"{runs[record['run_id']]}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(_rename(record, envs, devices, runs)))
    original = _compare_json([a / f.name for f in dict.fromkeys(f for f, _p, _r in records)], capsys)
    renamed = _compare_json([b / folder_names[f.name] for f in dict.fromkeys(f for f, _p, _r in records)], capsys)
    # the device's short names (aliases) follow its label: map the renamed ones back through both datasets
    old_ds = load([a], warn=lambda line: None)
    new_ds = load([b], warn=lambda line: None)
    back: dict[str, str] = {}
    for old, new in devices.items():
        old_labels = [label for label in old_ds.names if old in label]
        for label in old_labels:
            new_label = label.replace(old, new)
            back[new_ds.names[new_label]] = old_ds.names[label]
            back[new_label] = label
    back.update({new: old for old, new in devices.items()})
    back.update({new: old for old, new in envs.items()})
    back.update({f"{new}.json": f"{old}.json" for old, new in runs.items()})
    back.update({new: old for old, new in runs.items()})
    back.update({new: old for old, new in folder_names.items()})
    back[str(b)] = str(a)
    mapped = renamed
    for new in sorted(back, key=len, reverse=True):
        mapped = mapped.replace(new, back[new])
    return original, mapped


def test_renaming_every_env_device_and_run_changes_no_byte(tmp_path, capsys):
    original, mapped = _same_answer_renamed(tmp_path, [RESULTS / f for f in RECORD_FOLDERS], capsys)
    assert json.loads(original)["verdict"]["pairs"], "nothing compared: the test would pass on nothing"
    assert mapped == original


def test_a_boundary_verdict_does_not_move_with_names(tmp_path, capsys):
    """Two envs whose geometric-mean delta has an interval that nearly touches 0 (the case a seeded random draw
    flipped by name): the same verdict, to the byte, under the other names."""
    records = []
    for env, ms in (("before", 100.0), ("after", 91.5)):
        for rung, workload in (("fp32", {"precision": "fp32"}), ("bf16", {"precision": "bf16"})):
            for rep, factor in enumerate((1.0, 1.06, 0.97)):
                r = make_record(env=env, rung=rung, repeat=rep, workload=workload,
                                ms=noisy_ms(ms * factor, 0.002, seed=rep))
                r["started_at"] = f"2026-11-29T1{len(records) // 10}:0{len(records) % 10}:00+00:00"  # as a run has
                records.append(r)
    folder = write(tmp_path / "boundary", records)
    original, mapped = _same_answer_renamed(tmp_path / "renamed", [folder], capsys)
    speed = json.loads(original)["verdict"]["pairs"][0]["tokens_per_s_geomean"]
    assert min(abs(speed["ci_low"]), abs(speed["ci_high"])) < 0.01, speed  # on the boundary: a draw would flip it
    assert mapped == original
