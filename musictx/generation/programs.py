"""The General MIDI instrument of each written track, as the user asks: ``programs={MELODY:Flute,PIANO:0}``.

A model writes its tracks with the programs it read (POP909's three tracks all say 0, acoustic grand piano), so
a DAW opens a continuation as three pianos. ``programs`` names tracks (case does not matter) and gives each a
GM program, by number (0-127) or by pretty_midi's instrument name ("Flute", "Electric Bass (finger)"); a piano
continuation's one track is also called ``piano``. The
names are checked before the model loads; a name no written track has is said in one line, not ignored.
No torch.
"""

from __future__ import annotations

from collections.abc import Mapping

from musictx.decoding.errors import GenerateError
from musictx.tasks.take import Take


def parse_programs(spec) -> dict[str, int]:
    """{track name, lower case: GM program} from a mapping (the command line's ``programs={A:1,B:Flute}``) or
    a string ``"A=1,B=Flute"``; GenerateError naming ``programs`` for anything else."""
    if not spec:
        return {}
    if isinstance(spec, str):
        pairs = [part.split("=", 1) for part in spec.split(",") if part.strip()]
        if any(len(p) != 2 for p in pairs):
            raise GenerateError(f"programs={spec}: give TRACK=PROGRAM pairs, e.g. programs=MELODY=73,PIANO=0")
        spec = dict(pairs)
    if not isinstance(spec, Mapping):
        raise GenerateError(f"programs={spec!r}: give each track's program, e.g. programs={{MELODY:73,BRIDGE:Flute}}")
    return {str(name).strip().lower(): _program(name, value) for name, value in spec.items()}


def _program(name, value) -> int:
    import pretty_midi

    text = str(value).strip()
    if text.isdigit() and 0 <= int(text) <= 127:
        return int(text)
    try:
        return pretty_midi.instrument_name_to_program(text)
    except ValueError:
        raise GenerateError(f"programs.{name}={value}: a General MIDI program is 0-127 or an instrument name such "
                            "as Flute, Violin or 'Electric Bass (finger)'") from None


def apply_programs(takes: list[Take], programs: dict[str, int]) -> str | None:
    """Give each take's tracks named in ``programs`` their program (in place), each take's record its
    ``programs``; the line saying which names no written track has (None: every name was found)."""
    if not programs:
        return None
    found: set[str] = set()
    for take in takes:
        if hasattr(take.music, "tracks"):
            for track in take.music.tracks:
                key = track.name.strip().lower()
                if key in programs and not track.is_drum:
                    track.program = programs[key]
                    found.add(key)
        else:  # piano notes: one track, written by `notes_score`, named by its seed; "piano" names it too
            for key in (take.track.strip().lower(), "piano"):
                if key in programs:
                    take.program = programs[key]
                    found.add(key)
        take.record["programs"] = {k: v for k, v in programs.items() if k in found}
    missing = sorted(set(programs) - found)
    return f"programs: no written track is named {', '.join(missing)}; left as they were" if missing else None
