"""Does a model start the bundled motif's phrase again by itself? Teacher-forced odds of a restart.

    OMP_WAIT_POLICY=PASSIVE python scripts/restart_nll.py piano outputs/arms/K_loop/checkpoints/last.ckpt ...

The bundled motif (musictx/assets/motif.mid, 8 bars at 96 bpm, 20 s; ``--motif`` and ``--bpm`` for the same
motif at another tempo, from ``scripts/make_motif.py --bpm``) states a phrase of four bars and
then a second phrase that repeats its figure. A continuation that "brings the figure back" must, at some
point, start the phrase once more. This scores, for each model, the piece made of the motif followed by
its second phrase again (bars 5-8 from 20 s on), read teacher-forced:

- the NLL per token of the seed's own second phrase (its first repeat: recall once cued by the first);
- the NLL of the restart's first 40 tokens (after 20 s), and p(first bar of the restart), the probability
  that a sampler at temperature 1 plays that whole bar: about how often a sample starts the phrase again.

Sampled continuations show the same thing more noisily (musictx-evaluate mode=motif); this is the
measurement that moves first when training makes restarts more likely (docs/recall.md).
"""

from __future__ import annotations

import argparse
import math

import pretty_midi
import torch

from musictx.checkpoints.model_store import load_model
from musictx.evaluation.recall import token_nll
from musictx.generation.seeds import cut_at_seconds
from musictx.paths import BUNDLED_MOTIF

RESTART_TOKENS = 40


def bar_seconds(bpm: float) -> float:
    return 4 * 60.0 / bpm  # the motif is in 4/4: 2.5 s a bar at its 96 bpm


def motif_then_restart(path, bpm: float = 96.0) -> pretty_midi.PrettyMIDI:
    """The motif (8 bars), then its second phrase (bars 5-8) again from the end of bar 8."""
    pm = pretty_midi.PrettyMIDI(str(path))
    notes, phrase_s, seed_s = pm.instruments[0].notes, 4 * bar_seconds(bpm), 8 * bar_seconds(bpm)
    again = [pretty_midi.Note(n.velocity, n.pitch, n.start + seed_s - phrase_s, n.end + seed_s - phrase_s)
             for n in notes if n.start >= phrase_s - 1e-6]
    pm.instruments[0].notes = sorted(notes + again, key=lambda n: (n.start, n.pitch))
    return pm


def restart_figures(ref: str, motif=BUNDLED_MOTIF, bpm: float = 96.0) -> dict:
    net, tok, _ = load_model(ref)
    ids = tok.encode(motif_then_restart(motif, bpm))
    nll = token_nll(net.eval(), ids)  # nll[i] scores ids[i + 1]
    bar = bar_seconds(bpm)
    # index of the first id at or after each time: the length of the ids cut there
    phrase, seed_end, bar_end = (len(cut_at_seconds(tok, ids, s)) for s in (4 * bar, 8 * bar, 9 * bar))
    restart = nll[seed_end - 1:seed_end - 1 + RESTART_TOKENS]
    first_bar = nll[seed_end - 1:bar_end - 1]
    return {"second_phrase": float(nll[phrase - 1:seed_end - 1].mean()), "restart_40": float(restart.mean()),
            "first_bar_tokens": len(first_bar), "p_first_bar": math.exp(-float(first_bar.sum()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="shipped names, model folders or .ckpt files")
    parser.add_argument("--motif", default=str(BUNDLED_MOTIF), help="the motif (make_motif.py --bpm writes others)")
    parser.add_argument("--bpm", type=float, default=96.0, help="the motif's tempo")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | 2nd phrase of the seed | restart, first 40 tokens | p(whole first bar of the restart) |")
    print("|---|---:|---:|---:|")
    for ref in args.models:
        f = restart_figures(ref, args.motif, args.bpm)
        print(f"| {ref} | {f['second_phrase']:.2f} | {f['restart_40']:.2f} | {f['p_first_bar']:.1e} "
              f"({f['first_bar_tokens']} tokens) |")


if __name__ == "__main__":
    main()
