"""`python -m bench realtime`: one model's real-time factor, and two models timed interleaved on the
same settings (``--against-model``), the way the README's speed ratios are measured."""

from __future__ import annotations

import pytest

from bench import realtime
from musictx.paths import PRETRAINED_DIR


def test_two_models_are_timed_interleaved_and_their_ratio_printed(capsys):
    realtime.main(["--model", "pop", "--against-model", str(PRETRAINED_DIR / "pop"), "--batch-sizes", "1",
                   "--seconds", "2", "--repeats", "2"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 1 |")]
    assert [r.split(" | ")[1] for r in rows] == ["pop: defaults", f"{PRETRAINED_DIR / 'pop'}: defaults", "ratio"]
    assert "the first's tokens/s" in rows[2] and "x the first's" in rows[2]


def test_one_comparison_at_a_time(capsys):
    with pytest.raises(SystemExit):
        realtime.main(["--model", "pop", "--against", "hooks.bass_lean.strength=0", "--against-model", "pop"])
    assert "one comparison at a time" in capsys.readouterr().err
