"""The accompany scorecard's card (``musictx-evaluate mode=accompany``): one song's melody accompanied (BRIDGE and
PIANO) over the bars that cover ``seconds``, measured beside the song's real accompaniment there and beside chance.

The song is given as its MELODY track alone, a file beside its beat file (``accompany_song=false``), or whole
(``true``: its own BRIDGE and PIANO replaced in the bars written and kept around them, as ``musictx-generate
task=accompany seed_midi=song.mid bars=A-B`` does); ``accompany_context`` is what the model hears of the bars before
(`musictx.tasks.accompany.heard_before`). The bars start where the melody enters (``accompany_from=melody``), at the
first bar (``song``: the intro too) or at bar ``first_bar`` (``first_bar``: mid-song, the song's own bars before).
Measures: strong-beat onsets whose pitch class is in the annotated chord (``chord_midi.txt``; chance: a random pitch
class), how full the chords are, a repeated melody bar's accompaniment, density, register and pitch-class colour
against the real accompaniment, how much of it the counter-melody (BRIDGE) plays, the top-line interval at each seam
with the song's own accompaniment (a whole song given), the melody unchanged, the NLL of the real accompaniment with
and without its melody, and speed.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from symusic import Score

from musictx.decoding import SamplingOptions, context_length, repeat_plan
from musictx.evaluation.checks import ACCOMPANY_FROM
from musictx.evaluation.chords import Harmony
from musictx.evaluation.infill_scorecard import bar_seconds, file_span, middle_nll, seam_interval, without_in_bars
from musictx.io.chord_labels import Chords
from musictx.io.score_io import read_score
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.listening import scorecard_metrics as sm
from musictx.listening.note_span import Span
from musictx.tasks import DEFAULT_ACCOMPANY_CONTEXT, accompany_song, melody_keys, melody_song, read_song

ACCOMPANY_MEASURES = (  # key, label
    ("melody_unchanged", "melody unchanged, note for note (share of songs)"),
    ("chord_tone_share", "strong-beat onsets on a chord tone"),
    ("pitch_classes", "distinct pitch classes per half bar (how full the chords are)"),
    ("repeat_overlap", "a repeated melody bar's accompaniment: pitches shared with its first time"),
    ("density_ratio", "accompaniment notes per second / the real's"),
    ("mean_pitch", "accompaniment mean pitch (MIDI)"),
    ("pitch_spread", "accompaniment pitch spread (std, semitones)"),
    ("pc_correlation", "pitch-class correlation with the real accompaniment"),
    ("bridge_share", "share of the accompaniment's notes that BRIDGE plays"),
    ("seam_in", "top-line interval from the song's own accompaniment into the first bar (semitones; whole song)"),
    ("seam_out", "top-line interval from the last bar into the song's own after it (semitones; whole song)"),
    ("nll_melody", "NLL of the real accompaniment, melody given (bars 17-20)"),
    ("nll_no_melody", "NLL of the real accompaniment, melody silent there"),
    ("realtime", "x real time (music seconds / wall seconds)"),
)
ACCOMPANIMENT = ("BRIDGE", "PIANO")
SEAM_S = 4.0  # a seam's other side: the song's own accompaniment this many seconds before (after) the bars


def melody_file(path: Path, folder: Path) -> Path:
    """The song's MELODY track alone, beside a copy of its beat file (so its bars are the song's)."""
    score = read_score(path)
    score.tracks = [t for t in score.tracks if t.name.upper() == "MELODY"]
    out = folder / path.parent.name / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    score.dump_midi(str(out))
    shutil.copy(path.with_name("beat_midi.txt"), out.with_name("beat_midi.txt"))
    return out


def accompaniment_figures(span: Span, harmony: Harmony, seconds: float) -> tuple[dict, float]:
    share, chance = harmony.chord_tone_share(span.start, span.pitch)
    pitch = span.pitch.astype(np.float64)
    bridge = np.asarray(span.track_names)[span.track] == "BRIDGE" if len(span) else np.zeros(0, bool)
    return {"chord_tone_share": share, "density": len(span) / seconds,
            "pitch_classes": harmony.pitch_classes_per_span(span.start, span.pitch),
            "mean_pitch": float(pitch.mean()) if len(pitch) else float("nan"),
            "pitch_spread": float(pitch.std()) if len(pitch) else float("nan"),
            "bridge_share": float(bridge.mean()) if len(bridge) else float("nan")}, chance


def tracks_named(span: Span, names: tuple[str, ...]) -> Span:
    """The notes of ``span``'s tracks named ``names`` (POP909's names, any case)."""
    return span.select(np.isin(np.char.upper(np.asarray(span.track_names, dtype=str))[span.track], names))


def accompany_range(song, path: Path, seconds: float, start: str, first_bar: int = 17) -> tuple[int, int, np.ndarray]:
    """(s, e, bar-line seconds): the bars [s, e) covering ``seconds`` from the song's first bar (``start``
    "song"), from the bar where the melody (``path``'s MELODY track, or its only one) enters ("melody": a pop song's
    intro has no melody to accompany, so its accompaniment there can only be guessed), or from bar ``first_bar``
    ("first_bar", 1-based; the song's last where it is shorter)."""
    if start not in ACCOMPANY_FROM:
        raise ValueError(f"infill.accompany_from={start!r}: give {' or '.join(ACCOMPANY_FROM)}")
    lines = bar_seconds(song, list(range(song.n_bars + 1)))
    s = min(first_bar - 1, song.n_bars - 1) if start == "first_bar" else 0
    if start == "melody":
        notes = file_span(path)
        onsets = (tracks_named(notes, ("MELODY",)) if "MELODY" in map(str.upper, notes.track_names) else notes).start
        first = float(onsets.min()) if len(onsets) else float(lines[0])
        s = int(np.clip(np.searchsorted(lines, first + 1e-6, side="right") - 1, 0, song.n_bars - 1))
    e = int(min(np.searchsorted(lines, lines[s] + seconds - 1e-6), song.n_bars))
    return s, max(e, s + 1), lines


def accompany_card(net, tok, path: Path, folder: Path, opts: dict, sampling: SamplingOptions) -> dict:
    """{"song", "bars", "seconds", "model", "real", "chance"} of one song accompanied (the module's docstring)."""
    whole = bool(opts.get("accompany_song"))
    given = path if whole else melody_file(path, folder)
    song = melody_song(tok, given, anew=whole)  # a whole song: its own BRIDGE and PIANO written anew in the bars
    s, e, lines = accompany_range(song, given, float(opts["seconds"]), opts.get("accompany_from", "melody"),
                                  int(opts.get("first_bar", 17)))
    scheme = opts.get("accompany_scheme", "lead")
    # accompany_chords: the song's annotated chords given, as a lead sheet would (else the melody alone)
    chords = Chords.read(path.with_name("chord_midi.txt"), strict=False) if opts.get("accompany_chords") else None
    start = time.perf_counter()
    out, _ = accompany_song(net, tok, song, list(ACCOMPANIMENT), s, e, sampling, scheme=scheme, chords=chords,
                            context=opts.get("accompany_context") or DEFAULT_ACCOMPANY_CONTEXT)
    wall = time.perf_counter() - start
    model, real_row, chance = against_real(tok, song, path, out, (s, e), lines, seams=whole)
    model["melody_unchanged"] = float(melody_notes(read_score(given)) == melody_notes(out))
    model["realtime"] = (lines[e] - lines[s]) / wall
    model.update(accompaniment_nll(net, tok, path, scheme))
    return {"song": str(path), "bars": [s + 1, e], "seconds": lines[e] - lines[s], "model": model, "real": real_row,
            "chance": {"chord_tone_share": chance}}


def against_real(tok, song, path: Path, out: Score, bars: tuple[int, int], lines: np.ndarray, seams: bool
                 ) -> tuple[dict, dict, float]:
    """(the model's figures, the real accompaniment's, chance's chord-tone share) over bars [s, e) of ``out`` (the
    song accompanied) and of the song's own file ``path``; ``seams``: the seams with the song's own accompaniment
    around the bars (in ``out``: a whole song given) measured too."""
    s, e = bars
    t0, t1 = lines[s], lines[e]
    harmony = Harmony.read(path.with_name("chord_midi.txt"), path.with_name("beat_midi.txt"))
    real_all = tracks_named(file_span(path), ACCOMPANIMENT)
    real, new = real_all.window(t0, t1), tracks_named(file_span(out), ACCOMPANIMENT).window(t0, t1)
    model, chance = accompaniment_figures(new, harmony, t1 - t0)
    real_row, _ = accompaniment_figures(real, harmony, t1 - t0)
    pairs = repeat_plan(melody_keys(tok, song, {ROLE_PROGRAMS["MELODY"]}, s, e))
    model["repeat_overlap"] = repeat_overlap(new, lines[s:e + 1], pairs)
    real_row["repeat_overlap"] = repeat_overlap(real, lines[s:e + 1], pairs)
    model["density_ratio"] = model["density"] / max(real_row["density"], 1e-9)
    real_row["density_ratio"] = 1.0
    model["pc_correlation"], real_row["pc_correlation"] = sm.pc_correlation(new, real), 1.0
    if seams:
        model.update(seam_figures(real_all, new, t0, t1))
        real_row.update(seam_figures(real_all, real, t0, t1))
    return model, real_row, chance


def seam_figures(around: Span, span: Span, t0: float, t1: float) -> dict:
    """{"seam_in": the top-line interval (semitones) from the last onset of ``around`` (the song's own
    accompaniment) in the `SEAM_S` before t0 into ``span``'s first, "seam_out": from ``span``'s last into the first
    of ``around`` in the `SEAM_S` after t1}; nan where a side has no note."""
    none = span.select(np.zeros(len(span), dtype=bool))
    return {"seam_in": seam_interval(around.window(t0 - SEAM_S, t0), span, none),
            "seam_out": seam_interval(none, span, around.window(t1, t1 + SEAM_S))}


def melody_notes(score: Score) -> list[tuple]:
    """The notes of ``score``'s MELODY track (its first where none is named so), in order."""
    track = next((t for t in score.tracks if t.name.upper() == "MELODY"), score.tracks[0])
    a = track.notes.numpy()
    return sorted(zip(*(a[k].tolist() for k in ("time", "duration", "pitch", "velocity")), strict=True))


def repeat_overlap(span: Span, lines: np.ndarray, plan: dict[int, int]) -> float:
    """Mean over the bars of ``plan`` (bar -> the earlier bar with the same melody; bars counted from
    ``lines``' first, seconds) of the share of pitches the two bars' notes have in common; nan for none."""
    bars = {k: Counter(span.window(lines[k], lines[k + 1]).pitch.tolist()) for k in {*plan, *plan.values()}}
    shares = [sum((bars[k] & bars[j]).values()) / max(bars[k].total(), bars[j].total(), 1) for k, j in plan.items()]
    return float(np.mean(shares)) if shares else float("nan")


def accompaniment_nll(net, tok, path: Path, scheme: str = "lead") -> dict:
    """NLL of the song's real BRIDGE and PIANO in bars 17-20 written after its past, with the melody of
    those bars given, and with it silent there: how much the model reads the melody it accompanies. Scheme
    "lead": the accompaniment's ids in the plain stream; "infill": the taken middle of the infill format."""
    song = read_song(tok, path)
    s = min(16, song.n_bars - 5)
    melody, acc = {ROLE_PROGRAMS["MELODY"]}, {ROLE_PROGRAMS[r] for r in ACCOMPANIMENT}
    silent = without_in_bars(tok, song, s, s + 4, melody)
    if scheme == "lead":
        return {"nll_melody": stream_nll(net, tok, song, s, s + 4, acc),
                "nll_no_melody": stream_nll(net, tok, silent, s, s + 4, acc)}
    return {"nll_melody": middle_nll(net, tok, song, s, s + 4, False, acc),
            "nll_no_melody": middle_nll(net, tok, silent, s, s + 4, False, acc)}


def note_programs(tok, ids: np.ndarray) -> np.ndarray:
    """(T,) the program of the note each id belongs to (its Program, Pitch, Velocity, Duration), else -1."""
    out, current = np.full(len(ids), -1), -1
    for k, i in enumerate(int(x) for x in ids):
        kind = tok.type_of[i]
        if kind == "Program":
            current = int(tok.id_to_token(i).split("_")[1])
        elif kind not in ("Pitch", "Velocity", "Duration"):
            current = -1
        out[k] = current
    return out


@torch.no_grad()
def stream_nll(net, tok, song, s: int, e: int, programs: set[int]) -> float:
    """Mean NLL (nats/token) of the ids of ``programs``' notes in bars [s, e) of the plain stream, after as
    much of the song before them as the context holds."""
    end = song.end_of(e)
    lo = song.end_of(int(np.searchsorted(song.starts, end - (context_length(net) or 1024))))
    ids = song.ids[lo:end].astype(np.int64)
    x = torch.as_tensor(ids, dtype=torch.long)[None]  # (1, T)
    logp = torch.log_softmax(net.eval()(x)[0, :-1].float(), dim=-1)  # (T - 1, V)
    nll = -logp.gather(1, x[0, 1:, None])[:, 0].numpy()  # (T - 1,) the NLL of each next id
    chosen = np.isin(note_programs(tok, ids), list(programs)) & (np.arange(len(ids)) >= song.end_of(s) - lo)
    return float(nll[np.flatnonzero(chosen[1:])].mean())


def accompany_head(songs: str, settings: dict) -> str:
    """The accompany scorecard's first line: its songs, bars, what was given and what the model heard before."""
    start = {"melody": "the melody's entry", "song": "the song's start",
             "first_bar": f"bar {settings.get('first_bar')}"}[settings.get("accompany_from", "melody")]
    context = settings.get("accompany_context") or DEFAULT_ACCOMPANY_CONTEXT
    heard = {"melody": "its melody alone", "song": "its own bars"}[context]
    given = (f"in the whole song, its own BRIDGE and PIANO kept around them, hearing {heard} before them"
             if settings.get("accompany_song") else "for the MELODY")
    return (f"accompany scorecard: {songs}, the bars of {settings['seconds']:g} s from {start}, BRIDGE and PIANO "
            f"written {given}" + (" and the annotated chords" if settings.get("accompany_chords") else ""))
