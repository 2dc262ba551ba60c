"""The density asked per track (``hooks.density.piano`` / ``melody`` / ``bridge``, notes per bar) is what the
shipped pop writes, on a real POP909 song, sparser and busier than its own habit; a bad ask is one line naming
the option. (The tracks not asked are left to the model and its other hooks: over 20 validation songs the BRIDGE
wrote 1.0-1.7 notes a bar where it writes 2.1 alone, docs/generation.md.)"""

from __future__ import annotations

import pytest

from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.registry import build_hooks
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions

from .helpers import SHARED_DATA

SONG = SHARED_DATA / "pop" / "POP909" / "018" / "018.mid"
needs_pop = pytest.mark.skipif(not SONG.is_file(), reason=f"POP909 not found at {SONG} (CI and dev machines only)")
BARS = 8


def _per_bar(tmp_path, name: str, density: dict) -> list[dict]:
    # one draw a sample: the lean is measured, not the choice among 4 (with it the same bounds held, 3x slower)
    record = run(GenerateOptions(seed_midi=str(SONG), seed_seconds=10, seed_from=25, length_bars=BARS,
                                 num_samples=2, audio=False, include_seed=False, seed=1, progress_every_s=None,
                                 output_dir=str(tmp_path / name), hooks={"density": density}, best_of=1))
    return [{k.lower(): n / BARS for k, n in s["tracks"].items()} for s in record["samples"]]


@needs_pop
@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_asked_notes_per_bar_come_out_within_a_fifth_both_ways(tmp_path):
    own = _per_bar(tmp_path, "own", {})
    assert all(s["piano"] > 10 for s in own)  # the model's own habit: busier than both asks below
    for piano, melody in ((5, 3), (20, 6)):
        for got in _per_bar(tmp_path, f"p{piano}", {"piano": piano, "melody": melody}):
            assert got["piano"] == pytest.approx(piano, rel=0.2) and got["melody"] == pytest.approx(melody, rel=0.2)


def test_the_hook_is_made_only_when_asked_and_a_bad_ask_names_its_option():
    from musictx.decoding.hook import HookInputs
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.io.metrical_tokenizer import MetricalTokenizer

    tok = MetricalTokenizer()
    made = lambda density: [type(h).__name__ for h in build_hooks(  # noqa: E731
        HookInputs("continue", tok, SamplingOptions(hooks={"density": density}), programs=[0, 80, 81]))]
    assert "Density" not in made({}) and "Density" in made({"piano": 8})
    assert "Density" not in made({"piano": 8, "strength": 0})
    with pytest.raises(GenerateError, match=r"hooks.density.piano must be > 0 or null, got 0"):
        SamplingOptions(hooks={"density": {"piano": 0}}).check_sampling()


@needs_pop
def test_full_velocity_lets_a_pop_continuation_play_the_soft_notes_the_nucleus_cut(tmp_path):
    import pretty_midi

    softest = {}
    for full in (True, False):
        record = run(GenerateOptions(seed_midi=str(SONG), seed_seconds=10, seed_from=25, length_bars=BARS, best_of=1,
                                     num_samples=2, audio=False, include_seed=False, seed=1, progress_every_s=None,
                                     full_velocity=full, output_dir=str(tmp_path / str(full))))
        files = [tmp_path / str(full) / s["midi"] for s in record["samples"]]
        softest[full] = min(n.velocity for f in files for i in pretty_midi.PrettyMIDI(str(f)).instruments
                            for n in i.notes)
    assert softest[True] < softest[False]  # the velocity draws really went past the nucleus
