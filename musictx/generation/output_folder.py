"""Where and how ``musictx-generate`` writes its files (`write_run`), so that a run never deletes or overwrites a
file it did not write. The samplers hand over their samples as plain data (`musictx.tasks.take`); this
is the one place that writes them, records the run in ``generation.json`` and prints its summary.

A musician often continues a result in the folder it came from (``seed_midi=D/sample_03.mid output_dir=D``)
or keeps their own files beside the samples. So a run adds to its folder and never replaces: its samples
take the numbers after the highest ``sample_NN`` name already there (``sample_04``, ``sample_05`` ... above a
``sample_03``, whatever that file is), and its record is ``generation.json``, or ``generation_2.json``,
``generation_3.json`` ... when that name is taken. Each number is reserved by a hidden claim file created
exclusively (``O_EXCL``), so two runs writing into one folder at once cannot take the same
one either, and a run killed while it writes leaves no empty or partial file under a visible name.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from musictx.ctrl_c import remembered_ctrl_c
from musictx.io.audio import wav_beside
from musictx.io.jsonio import write_json
from musictx.io.midi_io import Notes
from musictx.io.midi_write import notes_score
from musictx.io.piano_roll import draw_figure, piano_roll_figure
from musictx.safe_output import atomic_paths, claim_numbered, release_name
from musictx.tasks.take import Batch, Take

# Any name that starts like a sample's (sample_07.mid, sample_07.png, sample_07_arcs_mean-mean_12.png, ...)
# holds its number: new samples are numbered after the highest of them.
SAMPLE_NAME = re.compile(r"sample_(\d+)")
RECORD = "generation.json"


def sample_name(number: int) -> str:
    """The stem of a sample's files: ``sample_00``, ``sample_01``, ... (three digits from 100 on)."""
    return f"sample_{number:02d}"


def sample_midi_name(number: int) -> str:
    """The MIDI file of sample ``number``: the name its claim reserves."""
    return f"{sample_name(number)}.mid"


def first_record_number(_names: list[str]) -> int:
    """The record's numbers start at 1 (``generation.json``) whatever the folder holds."""
    return 1


def first_free_number(names: list[str]) -> int:
    """The number after the highest that a name in ``names`` holds (hidden claims included)."""
    used = [int(m.group(1)) for name in names if (m := SAMPLE_NAME.match(name.lstrip(".")))]
    return max(used, default=-1) + 1


def record_name(number: int) -> str:
    """``generation.json``, then ``generation_2.json``, ``generation_3.json`` ... (N = 2, 3, ...)."""
    return RECORD if number == 1 else f"generation_{number}.json"


class Claims:
    """The names a run reserves in its folder before it writes: its sample numbers and its record's path
    (`record_name`), each by a hidden claim (`musictx.safe_output.claim_numbered`), so a ``kill -9`` at any
    moment leaves no empty or partial file under a visible name (each file is written atomically,
    `musictx.safe_output`). Around the writing (a context manager) it lets go of the sample claims; after a
    Ctrl-C it removes every file of the samples left unfinished (the interrupt ends there: ``stopped``); an
    OSError (a full disk) goes on. The record's claim goes with `release_record`, once the record is written."""

    def __init__(self, out_dir: Path, count: int):
        samples = (sample_midi_name, first_free_number, count)
        self.numbers, (record,) = claim_numbered(out_dir, samples, (record_name, first_record_number, 1))
        self.out_dir, self.record = out_dir, out_dir / record_name(record)
        self.samples: list[dict] = []  # the records of the samples written whole, in order
        self.stopped = False

    def reuse_line(self) -> str | None:
        """One line when the run's files are not the first names of an empty folder; None when they are."""
        if self.numbers[0] == 0 and self.record.name == RECORD:
            return None
        first, last = sample_name(self.numbers[0]), sample_name(self.numbers[-1])
        span = first if first == last else f"{first} to {last}"
        return (f"{self.out_dir} already holds earlier files: this run writes {span} and {self.record.name} beside "
                "them (nothing there is replaced or removed)")

    def release_record(self) -> None:
        release_name(self.record)

    def __enter__(self) -> Claims:
        return self

    def __exit__(self, kind, err, tb) -> bool:
        unfinished = [self.out_dir / sample_name(n) for n in self.numbers[len(self.samples):]]
        for number in self.numbers:
            release_name(self.out_dir / f"{sample_name(number)}.mid")
        if kind is not None and issubclass(kind, KeyboardInterrupt):  # these numbers were this run's alone
            for stem, suffix in itertools.product(unfinished, (".mid", ".png", ".wav")):
                stem.with_suffix(suffix).unlink(missing_ok=True)
            self.stopped = True
            return True
        if kind is not None:
            self.release_record()
        return False


def write_take(out_dir: Path, name: str, take: Take, soundfont: str | None, audio: bool) -> dict:
    """Write ``name``.mid and .png of one sample, together (both or neither), then its .wav; return its
    record for generation.json."""
    midi, png = out_dir / f"{name}.mid", out_dir / f"{name}.png"
    score = take.music
    if isinstance(score, Notes):  # piano notes: one named track on the seed's tempo map
        score = notes_score(score, program=take.program, timing=take.timing, name=take.track)
    roll = piano_roll_figure(take.roll, takeover=take.takeover, title=f"{name}: {len(take.roll)} notes",
                             earlier_from=take.earlier_from if take.takeover else None, parts=take.parts,
                             marked=take.marked)
    with atomic_paths([midi, png]) as (midi_tmp, png_tmp):
        score.dump_midi(str(midi_tmp))
        draw_figure(roll, png_tmp)
    wav = wav_beside(midi, soundfont) if audio else None
    return {"midi": midi.name, "png": png.name, "wav": wav, **take.record}


def write_run(out_dir: Path, batch: Batch, head: dict, no_audio: str | None, soundfont: str | None) -> dict:
    """Write each take under the next free sample number of ``out_dir``, then the run's record (``head``,
    the batch's own entries, the samples) and one line per sample; return the record. A Ctrl-C while sampling
    (``batch.cut_short``) or while writing still leaves the record of what was written, then raises
    KeyboardInterrupt saying so; the files of samples left unfinished are removed. ``no_audio``: why no WAV
    can be written (None: they are), said in one line."""
    out_dir.mkdir(parents=True, exist_ok=True)  # nothing was written before: every check raised first
    if no_audio:
        print(f"no WAV files: {no_audio}")
    audio = no_audio is None and not batch.cut_short
    samples, claims, stopped = _write_takes(out_dir, batch.takes, soundfont, audio)
    record_path = claims.record
    record = {**head, **batch.about, "samples": samples, "interrupted": batch.cut_short or stopped,
              "samples_not_written": len(batch.takes) - len(samples), "generation_wall_s": batch.wall,
              "new_tokens_per_s": sum(t.record["new_tokens"] for t in batch.takes) / max(batch.wall, 1e-9)}
    try:
        write_json(record_path, record, what="generation")
    finally:
        claims.release_record()
    for sample, take in zip(samples, batch.takes, strict=False):
        print(f"{out_dir / sample['midi']}: {take.line}")
    if stopped:
        raise KeyboardInterrupt(f"interrupted while writing: wrote {len(samples)} of the {len(batch.takes)} "
                                f"sample(s) and {record_path.name} to {out_dir.resolve()}")
    if batch.cut_short:
        got = [s["new_seconds"] for s in samples]
        raise KeyboardInterrupt(f"interrupted: wrote the {len(samples)} partial sample(s) so far "
                                f"({min(got):.1f} to {max(got):.1f} s of new music) to {out_dir.resolve()}")
    print(f"wrote {len(samples)} sample(s) and {record_path.name} to {out_dir.resolve()}")
    return record


def _write_takes(out_dir: Path, takes: list[Take], soundfont: str | None,
                 audio: bool) -> tuple[list[dict], Claims, bool]:
    """(the records of the samples written, the claims (the run's record's path), whether a Ctrl-C stopped
    the writing). A full disk raises (`musictx.safe_output.OutputError` names the file): finished files stay,
    this run's claims go."""
    with Claims(out_dir, len(takes)) as claims, remembered_ctrl_c() as pressed:
        if reuse := claims.reuse_line():
            print(reuse)
        for number, take in zip(claims.numbers, takes, strict=True):
            sample = write_take(out_dir, sample_name(number), take, soundfont, audio)
            # one append both records the sample and keeps its files: a Ctrl-C lands before it (the sample
            # counts as unfinished, its files go) or after it (kept and listed), never between the two
            claims.samples.append(sample)
            if pressed():  # its KeyboardInterrupt was swallowed (raised inside a GC callback): stop here
                raise KeyboardInterrupt
    return claims.samples, claims, claims.stopped
