"""The mutant screen places each one-line mutant in its own function, or says it cannot."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from ackstore.tools.mutant_screen import apply_mutant, matching, require_clean, sample

SOURCE = """def top(x):
    if x < 0:
        return 0
    return x


class Moves:
    def step(self, x):
        if x < 0:
            return 0
        return x + 1
"""


def _diff(minus: str, plus: str) -> str:
    return f"# name\n--- a.py\n+++ a.py\n@@ -1,3 +1,3 @@\n def f():\n-{minus}\n+{plus}\n"


def test_a_mutant_is_placed_in_its_own_function_with_its_indentation() -> None:
    method = apply_mutant(SOURCE, "m.xǁMovesǁstep__mutmut_3", _diff("    if x < 0:", "    if x <= 0:"))
    assert method == SOURCE.replace("        if x < 0:", "        if x <= 0:")
    function = apply_mutant(SOURCE, "m.x_top__mutmut_1", _diff("    if x < 0:", "    if x < 1:"))
    before, after = "    if x < 0:\n        return 0\n    return x\n", "    if x < 1:\n        return 0\n    return x\n"
    assert function == SOURCE.replace(before, after)


def test_a_mutant_that_cannot_be_placed_is_none() -> None:
    assert apply_mutant(SOURCE, "m.xǁMovesǁgone__mutmut_1", _diff("    return x", "    return 1")) is None
    assert apply_mutant(SOURCE, "m.xǁMovesǁstep__mutmut_1", _diff("    return y", "    return 1")) is None
    two = "--- a\n+++ a\n-    if x < 0:\n-        return 0\n+    pass\n"
    assert apply_mutant(SOURCE, "m.xǁMovesǁstep__mutmut_2", two) is None


def test_a_sample_is_seeded_in_order_and_whole_when_asked_for_all() -> None:
    names = [f"m{i}" for i in range(50)]
    drawn = sample(names, 10, 3)
    assert len(drawn) == 10 and drawn == sorted(drawn, key=names.index)
    assert drawn == sample(names, 10, 3)  # the same draw on every run
    assert drawn != sample(names, 10, 4)
    assert sample(names, 0, 3) == names and sample(names, 50, 3) == names and sample(names, 99, 3) == names


def test_only_picks_mutants_by_name_and_a_number_ends_where_it_ends() -> None:
    names = [f"m.x_f__mutmut_{i}" for i in (5, 50, 51, 105)] + ["m.xǁCǁg__mutmut_5"]
    assert matching(names, []) == names
    assert matching(names, ["_f__mutmut_5"]) == ["m.x_f__mutmut_5"]
    assert matching(names, ["mutmut_5"]) == ["m.x_f__mutmut_5", "m.xǁCǁg__mutmut_5"]
    assert matching(names, ["05"]) == ["m.x_f__mutmut_105"]
    assert matching(names, ["ǁCǁ", "f__mutmut_50"]) == ["m.x_f__mutmut_50", "m.xǁCǁg__mutmut_5"]


def test_a_screen_whose_tests_fail_without_a_mutant_refuses_to_start(tmp_path: Path) -> None:
    """Tests that fail anyway (here: a file the worktree does not hold) would call every
    mutant killed: the screen stops first and says why."""
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    env = {**os.environ, "ACKSTORE_PURE_PYTHON": "1"}
    passing = argparse.Namespace(tests=["test_ok.py"], timeout=120.0, slow=False)
    require_clean(passing, tmp_path, env)  # no exit
    missing = argparse.Namespace(tests=["test_ok.py", "test_uncommitted.py"], timeout=120.0, slow=False)
    with pytest.raises(SystemExit, match=r"the tests fail on HEAD without a mutant .*commit them first"):
        require_clean(missing, tmp_path, env)
