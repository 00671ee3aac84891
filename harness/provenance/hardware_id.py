"""The one rule for the ids the harness records of hardware (the machine: harness.provenance.envinfo.machine_id; the GPU:
harness.provenance.nvml.gpu_id): stable and non-identifying, the raw id never recorded."""

from __future__ import annotations

import hashlib
import hmac


def hashed_id(raw: str, app: bytes) -> str:
    """12 hex digits of HMAC-SHA256 keyed by the raw id over an app string, as systemd's app-specific ids."""
    return hmac.new(raw.strip().encode(), app, hashlib.sha256).hexdigest()[:12]
