"""The best of K: a metrical continuation drawn K times and kept where the model's critic
(`musictx.listening.critic.Critic`, ``critic.json`` beside its weights) finds it most like a song.

The sampler leans each draw toward the seed; a choice among whole continuations can weigh what no single draw
sees: the melody's range and leaps over 30 s, the rhythm's variety, the harmony moving bar to bar
(docs/generation.md, "Best of K"). The K candidates of a sample are drawn in the same batch as the others, each
with its own random draws, and measured as the critic was fit: the continuation written out with its seed
(`continuation_score`) on its own clock (the seed's tempo map and meter), the new bars against the seed's.
"""

from __future__ import annotations

import numpy as np

from musictx.decoding.errors import GenerateError
from musictx.io.score_io import score_to_pretty_midi
from musictx.listening.critic import Critic
from musictx.listening.listen_features import SongContext, excerpt_features
from musictx.listening.note_span import Span
from musictx.tasks.metrical_score import continuation_score
from musictx.tasks.metrical_seeds import MetricalSeed


def candidates_per_sample(best_of: int | None, critic: Critic | None) -> int:
    """How many candidates a sample is chosen from: ``best_of`` as asked, else the critic's own number, else 1.
    GenerateError for a choice asked of a model that has no critic."""
    if best_of is None:
        return critic.best_of if critic is not None else 1
    if best_of > 1 and critic is None:
        raise GenerateError(f"best_of={best_of}: this model has no critic (critic.json beside its weights) to "
                            "choose by; best_of=1 or null samples without a choice")
    return best_of


def candidate_features(tok, seed: MetricalSeed, new_ids: np.ndarray, bars: int) -> dict[str, float]:
    """The listening features of ``bars`` new bars (``new_ids``) after ``seed``, on the written file's clock:
    what the critic reads (and what `scripts/fit_critic.py` fits it on, the song's own bars alike)."""
    pm = score_to_pretty_midi(continuation_score(tok, seed, new_ids))
    span, clock = Span.from_pretty_midi(pm), SongContext.of_midi(pm)
    t0 = seed.seconds  # the written file starts at the seed's first bar line
    lines = seed.new_bar_lines_seconds(bars)  # (bars + 1,) on the seed file's clock
    return excerpt_features(span, t0, t0 + float(lines[-1] - lines[0]), clock, span.window(0.0, t0))


def choose(tok, seed: MetricalSeed, pieces: list[np.ndarray], k: int, bars: int,
           critic: Critic | None) -> tuple[list[np.ndarray], list[dict]]:
    """Of ``pieces`` (K candidates of each sample, sample by sample: rows s*K .. s*K+K-1), the one per sample
    the critic scores highest, and each sample's record: the candidates' scores and which was kept."""
    if k == 1 or critic is None:
        return pieces, [{} for _ in pieces]
    chosen, records = [], []
    for s in range(0, len(pieces), k):
        group = pieces[s:s + k]
        scores = critic.logit([candidate_features(tok, seed, ids, bars) for ids in group])  # (K,)
        best = int(np.argmax(scores))
        chosen.append(group[best])
        records.append({"best_of": k, "critic_scores": [round(float(x), 3) for x in scores], "kept": best})
    return chosen, records
