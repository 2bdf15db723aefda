"""What a team embedding ackstore installs: compatible ranges for the library's
dependencies (the exact versions the tests ran with pinned in constraints.txt, each inside
its range), and the license declared and shipped."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            out[name.lower().replace("_", "-")] = version
    return out


def test_runtime_dependencies_are_ranges_that_hold_the_tested_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    runtime = project["dependencies"] + [
        d for extra in ("spark", "fast", "metrics") for d in project["optional-dependencies"][extra]
    ]
    for dep in runtime:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+),<([0-9.]+)", dep)
        assert m, f"{dep}: a library dependency is a range (>=tested,<next major), not a pin"
        name, low, high = m.group(1).lower(), m.group(2), m.group(3)
        tested = tuple(int(x) for x in pins[name].split(".")[:3])
        assert tuple(int(x) for x in low.split(".")) <= tested < tuple(int(x) for x in high.split(".")), dep


def test_the_license_is_declared_and_shipped() -> None:
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    meta = metadata.metadata("ackstore")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])
