"""What a listener hears in an excerpt, as one row of numbers: the features of the two-sample test
(`musictx.evaluation.two_sample`). ONE function, `excerpt_features`, computes them for a generated excerpt and
a real one alike, from the notes struck in [t0, t1) on the song's own clock and the song's beats and chords.

Families (names are prefixed so a table groups them): ``tex_`` texture (notes sounding at once, notes per
onset, notes per second, register), ``har_`` harmony (notes on the song's annotated chord tones, the lowest
downbeat note against the chord's root, pitch-class entropy, semitone clashes), ``mel_`` the MELODY track and
``top_`` the top line (silence, steps, leaps, range), ``rhy_`` rhythm (onsets on the beat's sixteenths,
inter-onset intervals in beats), ``dyn_`` velocity, ``str_`` structure (bar-to-bar similarity, exact repeats,
closeness to the seed), ``trk_`` each POP909 role (MELODY/BRIDGE/PIANO presence, silence, density).
Times are read in beats through the song's beats (POP909's ``beat_midi.txt``, else the file's tempo map), so
a tempo does not change a feature. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pretty_midi

from musictx.io.chord_labels import Chords
from musictx.io.keys import KK_MAJOR, KK_MINOR
from musictx.io.score_prep import role_of
from musictx.listening import scorecard_metrics as sm
from musictx.listening.note_span import Span

ROLES = ("MELODY", "BRIDGE", "PIANO")
ON_BEAT = 0.12  # an onset within this many beats of a sixteenth is on it
NEAR_S = 0.06  # an onset this close to a downbeat is struck on it
CHORD_AFTER_S = 0.03  # chords are looked up this long after an onset: the chord file's and the beats' times
                     # differ by milliseconds, and a note on a chord change belongs to the new chord
LISTEN_AFTER_S = 0.02  # the texture is sampled this long after each sixteenth (a staccato note is heard there)


@dataclass(frozen=True)
class SongContext:
    """The song's clock: beats, downbeats and strong beats (downbeats and half bars, s), its chords (None
    without a chord file) and their roots."""

    beats: np.ndarray  # (B,)
    downbeats: np.ndarray  # (D,)
    strong: np.ndarray  # (S,)
    chords: Chords | None  # with each chord's root pitch class (`Chords.roots`)

    @classmethod
    def read(cls, path: str | Path, pm: pretty_midi.PrettyMIDI | None = None) -> SongContext:
        """POP909's beat_midi.txt and chord_midi.txt beside ``path`` when there; else the file's tempo map."""
        path = Path(path)
        beats_path, chords_path = path.with_name("beat_midi.txt"), path.with_name("chord_midi.txt")
        chords = Chords.read(chords_path, strict=False) if chords_path.is_file() else None
        if not beats_path.is_file():
            clock = cls.of_midi(pm or pretty_midi.PrettyMIDI(str(path)))
            return cls(clock.beats, clock.downbeats, clock.strong, chords)
        rows = np.loadtxt(beats_path, ndmin=2)
        beats, downbeats = rows[:, 0], rows[rows[:, 2] == 1, 0]
        strong = rows[(rows[:, 1] == 1) | (rows[:, 2] == 1), 0]
        return cls(np.asarray(beats, float), np.asarray(downbeats, float), np.asarray(strong, float), chords)

    @classmethod
    def of_midi(cls, pm: pretty_midi.PrettyMIDI) -> SongContext:
        """The clock of a file with no beat file: its tempo map and meter (a continuation as written); its
        strong beats are the downbeats and the half bars between them."""
        beats, downbeats = np.asarray(pm.get_beats(), float), np.asarray(pm.get_downbeats(), float)
        strong = np.sort(np.concatenate([downbeats, (downbeats[:-1] + downbeats[1:]) / 2]))
        return cls(beats, downbeats, strong, None)

    def beat_of(self, t: np.ndarray) -> np.ndarray:
        """Times (s) as fractional beat numbers, extended past the last beat at its period."""
        b = self.beats
        period = float(np.median(np.diff(b))) if len(b) > 1 else 0.5
        idx = np.interp(t, b, np.arange(len(b), dtype=float))
        return np.where(t > b[-1], len(b) - 1 + (t - b[-1]) / period, idx)

    def root_at(self, t: float) -> int:
        """The root pitch class of the chord sounding at ``t``; -1 where none is (or no chords)."""
        if self.chords is None:
            return -1
        k = int(np.searchsorted(self.chords.starts, t, side="right")) - 1
        ok = 0 <= k < len(self.chords.roots) and t < self.chords.ends[k] and self.chords.tones[k]
        return int(self.chords.roots[k]) if ok else -1


def excerpt_features(notes: Span, t0: float, t1: float, song: SongContext, seed: Span) -> dict[str, float]:
    """Every feature of the notes struck in [t0, t1) (``notes`` may hold more; ends are cut at ``t1``), with
    ``seed`` the music before (for the structure family). The same call for generated and real music."""
    w = notes.window(t0, t1)
    w = Span(w.start, np.minimum(w.end, t1), w.pitch, w.velocity, w.track, w.track_names)
    grid = _sixteenths(song, t0, t1)  # (P,) times a listener samples the texture at
    return {**_texture(w, t0, t1, grid), **_harmony(w, song, t0, t1), **_melody(w),
            **_rhythm(w, song), **_dynamics(w), **_structure(w, song, t0, t1, seed), **_tracks(w, t0, t1, grid)}


def _sixteenths(song: SongContext, t0: float, t1: float) -> np.ndarray:
    b0, b1 = song.beat_of(np.array([t0, t1]))
    steps = np.arange(np.ceil(b0 * 4), np.floor(b1 * 4) + 1) / 4  # (P,) beat numbers
    bt = song.beats
    period = float(np.median(np.diff(bt))) if len(bt) > 1 else 0.5
    times = np.where(steps > len(bt) - 1, bt[-1] + (steps - (len(bt) - 1)) * period,
                     np.interp(steps, np.arange(len(bt), dtype=float), bt))
    return times[(times >= t0) & (times < t1)] + LISTEN_AFTER_S


def _sounding(span: Span, at: np.ndarray) -> np.ndarray:
    """(P,) notes sounding at each time (start <= t < end)."""
    if len(span) == 0 or len(at) == 0:
        return np.zeros(len(at))
    return ((span.start[None, :] <= at[:, None] + 1e-6) & (span.end[None, :] > at[:, None] + 1e-6)).sum(axis=1)


def _onsets(span: Span, group_s: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """(distinct onset times, notes struck at each), notes within ``group_s`` of each other one onset."""
    if len(span) == 0:
        return np.zeros(0), np.zeros(0)
    t = np.sort(span.start)
    new = np.concatenate([[True], np.diff(t) > group_s])
    heads = np.flatnonzero(new)
    return t[heads], np.diff(np.concatenate([heads, [len(t)]]))


def _stat(x, fn, empty: float = 0.0) -> float:
    x = np.asarray(x, dtype=float)
    return float(fn(x)) if len(x) else empty


def _texture(w: Span, t0: float, t1: float, grid: np.ndarray) -> dict:
    onsets, per_onset = _onsets(w)
    at_onsets = _sounding(w, onsets)
    on_grid = _sounding(w, grid)
    return {"tex_at_once_mean": _stat(at_onsets, np.mean),
            "tex_at_once_p90": _stat(at_onsets, lambda x: np.percentile(x, 90)),
            "tex_sounding_mean": _stat(on_grid, np.mean), "tex_silent_share": _stat(on_grid == 0, np.mean, 1.0),
            "tex_notes_per_onset": _stat(per_onset, np.mean), "tex_notes_per_s": len(w) / (t1 - t0),
            "tex_onsets_per_s": len(onsets) / (t1 - t0), "tex_pitch_mean": _stat(w.pitch, np.mean, 60.0),
            "tex_pitch_std": _stat(w.pitch, np.std), "tex_pitch_range": _stat(w.pitch, np.ptp),
            "tex_low_share": _stat(w.pitch <= sm.BASS_CEILING, np.mean),
            "tex_duration_s_mean": _stat(w.end - w.start, np.mean)}


def _harmony(w: Span, song: SongContext, t0: float, t1: float) -> dict:
    hist = np.bincount(w.pitch % 12, minlength=12).astype(float)
    p = hist / hist.sum() if hist.sum() else np.full(12, 1 / 12)
    out = {"har_pc_entropy": float(-(p[p > 0] * np.log2(p[p > 0])).sum()), "har_pcs_used": float((hist > 0).sum()),
           "har_key_clarity": _key_clarity(hist), "har_semitone_clash": _clash(w)}
    for name, part in (("all", w), ("piano", _role_span(w, "PIANO")), ("melody", _role_span(w, "MELODY"))):
        out[f"har_chord_tone_{name}"] = _chord_tone_share(part, song)
    out["har_triad_fit"] = _triad_fit(w, song, t0, t1)
    out["har_triad_fit_piano"] = _triad_fit(_role_span(w, "PIANO"), song, t0, t1)
    out.update(_downbeat_bass(w, song, t0, t1))
    return out


def _key_clarity(hist: np.ndarray) -> float:
    if hist.sum() == 0 or np.all(hist == hist[0]):
        return 0.0
    return max(float(np.corrcoef(hist, np.roll(prof, k))[0, 1])
               for prof in (KK_MAJOR, KK_MINOR) for k in range(12))


def _clash(w: Span) -> float:
    """Share of onsets at which two sounding notes are a semitone (or major seventh) apart."""
    onsets, _ = _onsets(w)
    if not len(onsets):
        return 0.0
    hits = 0
    for t in onsets:
        pcs = {int(p) % 12 for p in w.pitch[(w.start <= t + 1e-6) & (w.end > t + 1e-6)]}
        hits += any((pc + 1) % 12 in pcs for pc in pcs)
    return hits / len(onsets)


def _chord_tone_share(span: Span, song: SongContext) -> float:
    """Share of the notes struck under an annotated chord that are its tones; nan without chords."""
    if song.chords is None:
        return float("nan")
    tones = [song.chords.at(float(t) + CHORD_AFTER_S) for t in span.start]
    judged = [(int(p) % 12) in c for p, c in zip(span.pitch, tones, strict=True) if c]
    return float(np.mean(judged)) if judged else float("nan")


TRIADS = [np.array([r, (r + third) % 12, (r + 7) % 12]) for r in range(12) for third in (3, 4)]  # 24 triads


def _triad_fit(span: Span, song: SongContext, t0: float, t1: float) -> float:
    """The share of the notes struck in each half bar that fit the half bar's best major or minor triad, over
    the window: whether the notes make chords at all, whichever chords (the annotation is not read; a song
    moved a semitone fits as well). nan without notes."""
    edges = np.concatenate([[t0], song.strong[(song.strong > t0) & (song.strong < t1)], [t1]])
    k = np.searchsorted(edges, span.start, side="right") - 1  # (N,) half bar of each note
    fit = 0
    for h in np.unique(k):
        counts = np.bincount(span.pitch[k == h] % 12, minlength=12)
        fit += max(int(counts[t].sum()) for t in TRIADS)
    return fit / len(span) if len(span) else float("nan")


def _downbeat_bass(w: Span, song: SongContext, t0: float, t1: float) -> dict:
    """Over the window's downbeats: struck at all, the lowest note struck the chord's root / a chord tone."""
    bars = song.downbeats[(song.downbeats >= t0) & (song.downbeats < t1)]
    struck, root, tone = [], [], []
    for d in bars:
        near = np.abs(w.start - d) <= NEAR_S
        struck.append(near.any())
        chord = song.chords.at(float(d) + CHORD_AFTER_S) if song.chords is not None else frozenset()
        if near.any() and chord:
            low = int(w.pitch[near].min()) % 12
            root.append(low == song.root_at(float(d) + CHORD_AFTER_S))
            tone.append(low in chord)
    return {"har_downbeat_struck": _stat(struck, np.mean), "har_bass_is_root": _stat(root, np.mean, np.nan),
            "har_bass_is_chord_tone": _stat(tone, np.mean, np.nan)}


def _role_span(w: Span, role: str) -> Span:
    names = [i for i, n in enumerate(w.track_names) if (role_of(n) or n.upper()) == role]
    return w.select(np.isin(w.track, names))


def _line(pitches: np.ndarray, prefix: str) -> dict:
    steps = np.abs(np.diff(pitches.astype(int)))
    return {f"{prefix}_step_share": _stat((steps >= 1) & (steps <= 2), np.mean),
            f"{prefix}_repeat_share": _stat(steps == 0, np.mean), f"{prefix}_leap_share": _stat(steps >= 5, np.mean),
            f"{prefix}_interval_mean": _stat(steps, np.mean), f"{prefix}_range": _stat(pitches, np.ptp)}


def _melody(w: Span) -> dict:
    mel = _role_span(w, "MELODY")
    order = np.argsort(mel.start, kind="stable")
    _, top = sm.top_line(w)
    return {**_line(mel.pitch[order], "mel"), **_line(top, "top"),
            "mel_above_rest": _stat(_melody_on_top(w, mel), np.mean, 0.0)}


def _melody_on_top(w: Span, mel: Span) -> np.ndarray:
    """(M,) whether each melody note is the highest note struck at its onset."""
    return np.array([p >= w.pitch[np.abs(w.start - t) <= 0.02].max()
                     for t, p in zip(mel.start, mel.pitch, strict=True)])


def _rhythm(w: Span, song: SongContext) -> dict:
    onsets, _ = _onsets(w)
    beats = song.beat_of(onsets)  # (K,)
    phase = beats % 1.0
    out = {}
    for k, name in enumerate(("on_beat", "e16", "and8", "a16")):  # the sixteenths of a beat
        out[f"rhy_{name}"] = _stat(np.abs(((phase - k / 4) + 0.5) % 1.0 - 0.5) <= ON_BEAT, np.mean)
    out["rhy_off_grid"] = 1.0 - sum(out.values()) if len(onsets) else 0.0
    bar_pos = np.interp(onsets, song.downbeats, np.arange(len(song.downbeats), dtype=float)) % 1.0 \
        if len(song.downbeats) > 1 else np.zeros(len(onsets))
    out["rhy_on_downbeat"] = _stat(np.minimum(bar_pos, 1 - bar_pos) < 0.02, np.mean)
    ioi = np.diff(beats)  # (K - 1,) beats
    out.update({"rhy_ioi_mean": _stat(ioi, np.mean, 4.0), "rhy_ioi_cv": _stat(ioi, lambda x: x.std() / x.mean(), 0.0),
                "rhy_ioi_p10": _stat(ioi, lambda x: np.percentile(x, 10), 4.0),
                "rhy_ioi_p90": _stat(ioi, lambda x: np.percentile(x, 90), 4.0),
                "rhy_ioi_16th": _stat(np.abs(ioi - 0.25) < 0.06, np.mean),
                "rhy_ioi_8th": _stat(np.abs(ioi - 0.5) < 0.06, np.mean),
                "rhy_ioi_beat_plus": _stat(ioi >= 0.94, np.mean),
                "rhy_dur_beats_mean": _stat(song.beat_of(w.end) - song.beat_of(w.start), np.mean)})
    return out


def _dynamics(w: Span) -> dict:
    v = w.velocity.astype(float)
    mel, piano = _role_span(w, "MELODY"), _role_span(w, "PIANO")
    gap = float(mel.velocity.mean() - piano.velocity.mean()) if len(mel) and len(piano) else 0.0
    return {"dyn_vel_mean": _stat(v, np.mean, 0.0), "dyn_vel_min": _stat(v, np.min, 0.0),
            "dyn_vel_max": _stat(v, np.max, 0.0), "dyn_vel_std": _stat(v, np.std),
            "dyn_vel_spread": _stat(v, lambda x: np.percentile(x, 90) - np.percentile(x, 10)),
            "dyn_vel_levels": float(len(np.unique(v))), "dyn_melody_over_piano": gap}


def _bar_rows(w: Span, song: SongContext, t0: float, t1: float) -> list[Span]:
    edges = np.concatenate([[t0], song.downbeats[(song.downbeats > t0) & (song.downbeats < t1)], [t1]])
    return [w.window(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b - a > 0.5]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else 0.0


def _structure(w: Span, song: SongContext, t0: float, t1: float, seed: Span) -> dict:
    bars = _bar_rows(w, song, t0, t1)
    pcs = [np.bincount(b.pitch % 12, minlength=12).astype(float) for b in bars]
    keys = [frozenset(zip(np.round(song.beat_of(b.start) - song.beat_of(np.array([b.start.min()]))[0], 2).tolist(),
                          b.pitch.tolist(), strict=True)) if len(b) else frozenset() for b in bars]
    counts = np.array([len(b) for b in bars], float)
    seed_hist, own = sm.pitch_class_histogram(seed), sm.pitch_class_histogram(w)
    reuse = sm.motif_reuse(sm.top_line(w)[1], sm.top_line(seed)[1])["transposed"]
    seed_rate = len(seed) / max(float(seed.end.max() - seed.start.min()), 1.0) if len(seed) else 0.0
    return {"str_bar_pc_similarity": _stat([_cos(a, b) for a, b in zip(pcs[:-1], pcs[1:], strict=True)], np.mean),
            "str_bar_repeat_exact": _stat([k in keys[:i] and bool(k) for i, k in enumerate(keys)], np.mean),
            "str_bar_density_cv": _stat(counts, lambda x: x.std() / x.mean() if x.mean() else 0.0),
            "str_empty_bars": _stat(counts == 0, np.mean), "str_seed_pc_corr": _cos(own, seed_hist),
            "str_seed_motif_reuse": 0.0 if not np.isfinite(reuse) else float(reuse),
            "str_seed_pitch_shift": _stat(w.pitch, np.mean, 0.0) - _stat(seed.pitch, np.mean, 0.0) if len(w) else 0.0,
            "str_seed_density_ratio": (len(w) / (t1 - t0)) / seed_rate if seed_rate else 0.0}


def _tracks(w: Span, t0: float, t1: float, grid: np.ndarray) -> dict:
    out = {}
    for role in ROLES:
        s = _role_span(w, role)
        key = role.lower()
        out.update({f"trk_{key}_present": float(len(s) > 0),
                    f"trk_{key}_silent": _stat(_sounding(s, grid) == 0, np.mean, 1.0),
                    f"trk_{key}_notes_per_s": len(s) / (t1 - t0), f"trk_{key}_pitch_mean": _stat(s.pitch, np.mean, 0.0),
                    f"trk_{key}_at_once": _stat(_sounding(s, _onsets(s)[0]), np.mean, 0.0)})
    return out
