"""The copy cache: bars filled in the middle of a song, or a song's continuation, may repeat the song's own bars.

A pop song plays its sections more than once: the middle of a verse comes back in the next verse, a chorus
comes back three times. The network sees about 1,000 ids around the gap, two bars or so on either side,
and it copies weakly even inside that window (docs/infill.md, the copy probe). The cache sees the whole
song: the ids of every bar outside the gap, written as the middle is written (only the tracks being
filled), and the middle's ids so far. Its guess for the next id is what followed the longest earlier
match of the last ids (the ids after every place where that match occurs, counted), and the sampled
distribution is the mixture

    p(next) = (1 - w(k)) * p_net(next) + w(k) * q_cache(next)

where ``k`` is the length of the match and ``w(k)`` a weight fitted by likelihood on validation songs
(`COPY_WEIGHTS`, ``python -m bench copy_fit``): a match of 3 ids says little, one of 20 ids is nearly
always right. The mixture is a distribution, so the NLL the infill scorecard reports is the NLL of what
the sampler draws from (the continuous-cache / pointer-mixture idea of Grave et al. 2017 and
kNN-LM, on the song's ids instead of hidden states). numpy and torch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.option_fields import option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

MAX_MATCH = 24  # ids; longer matches say nothing more (their weight is already ~1)
# (shortest match length in ids, mixture weight): the weight of the cache for a longest match of at least
# that many ids, fitted on 30 validation songs (bars 17-20 filled, every track; the fit pools the song with
# and without the bars after the gap): `python -m bench copy_fit` (docs/infill.md)
COPY_WEIGHTS = ((0, 0.0), (2, 0.04), (3, 0.03), (4, 0.06), (6, 0.21), (8, 0.31), (12, 0.41), (16, 0.59),
                (24, 0.95))


def weight_of(k: int, weights=COPY_WEIGHTS) -> float:
    """The mixture weight of a longest match of ``k`` ids."""
    w = 0.0
    for shortest, value in weights:
        if k >= shortest:
            w = value
    return w


LOOSE_FAMILIES = ("Velocity",)  # token families whose ids all match one another


def loose_ids(tok) -> np.ndarray:
    """(V,) bool: the ids of `LOOSE_FAMILIES` in ``tok``'s vocabulary."""
    return np.isin(tok.type_of, LOOSE_FAMILIES)


def match_keys(ids: np.ndarray, loose: np.ndarray | None) -> np.ndarray:
    """``ids`` as the cache compares them: every id ``loose`` (V,) marks (velocities) reads as one, -1, so
    that a bar played again a little louder still matches."""
    ids = np.asarray(ids, dtype=np.int64)
    return ids if loose is None else np.where(loose[ids], -1, ids)


def longest_match(history: np.ndarray, max_match: int = MAX_MATCH, keys: np.ndarray | None = None
                  ) -> tuple[int, np.ndarray]:
    """(k, the ids that followed each earlier occurrence of the last k ids of ``history``), k the longest such
    match up to ``max_match`` ids (0 and no ids when the last id never occurred before). ``keys``
    (`match_keys` of the history): what is compared; the ids that followed are the history's own."""
    history = np.asarray(history)
    keys = history if keys is None else keys
    if len(history) < 2:
        return 0, np.zeros(0, dtype=history.dtype)
    ends = np.flatnonzero(keys[:-1] == keys[-1])  # (M,) earlier places whose key is the last one's
    k = 1 if len(ends) else 0
    while len(ends) and k < max_match:
        reach = ends[ends - k >= 0]
        longer = reach[keys[reach - k] == keys[-1 - k]]
        if not len(longer):
            break
        ends, k = longer, k + 1
    return k, history[ends + 1]


def cache_distribution(nexts: np.ndarray, vocab_size: int) -> np.ndarray:
    """(V,) the share of each id among ``nexts``."""
    counts = np.bincount(np.asarray(nexts, dtype=np.int64), minlength=vocab_size)[:vocab_size]
    return counts / max(counts.sum(), 1)


def mix_log_probs(log_p: Tensor, q: np.ndarray, w: float) -> Tensor:
    """(V,) log of ``(1 - w) * p + w * q``; ids the net gives -inf and the cache 0 stay -inf."""
    if w <= 0:
        return log_p
    q_t = torch.as_tensor(q, dtype=log_p.dtype, device=log_p.device)
    return torch.logaddexp(log_p + float(np.log1p(-min(w, 1 - 1e-6))), torch.log(q_t * w))


class CopyCache(LogitsHook):
    """The sampler's hook: mixes the net's distribution with the cache's (module docstring). ``history``: the
    song's ids the middle may copy, in the middle's own format, ending with the ids the prompt already holds
    of the middle (its first Bar). ``strength``
    scales every weight (0: off, 1: the fitted weights). Put it before the grammar hooks: the ids they forbid
    stay forbidden."""

    def __init__(self, history: np.ndarray, strength: float = 1.0, weights=COPY_WEIGHTS,
                 loose: np.ndarray | None = None):
        self.history = np.asarray(history, dtype=np.int64)
        self.strength, self.weights, self.loose = strength, weights, loose
        self.mixed = 0  # draws (row by row) mixed with the cache
        self.bases: list[tuple[np.ndarray, np.ndarray]] = []  # per row: (ids it may copy, their match keys)
        self.rows: list[list[int]] = []

    def start(self, prompt: Tensor) -> None:
        # keys once: each step only adds the ids drawn since
        self.bases = [(self.history, match_keys(self.history, self.loose))] * prompt.shape[0]
        self.rows = [[] for _ in range(prompt.shape[0])]

    def __call__(self, logits: Tensor) -> Tensor:
        out = torch.log_softmax(logits.float(), dim=-1)  # (B, V)
        for b, drawn in enumerate(self.rows):
            new = np.asarray(drawn, dtype=np.int64)
            base, keys = self.bases[b]
            k, nexts = longest_match(np.concatenate([base, new]),
                                     keys=np.concatenate([keys, match_keys(new, self.loose)]))
            w = self.strength * weight_of(k, self.weights)
            if w > 0 and len(nexts):
                out[b] = mix_log_probs(out[b], cache_distribution(nexts, out.shape[-1]), w)
                self.mixed += 1
        return out.to(logits.dtype)

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        for b, i in enumerate(next_ids.tolist()):
            self.rows[b].append(int(i))


def cache_lookups(history: np.ndarray, targets: np.ndarray, loose: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """((T,) the longest match before each of ``targets``, (T,) the share the cache gives it), the cache
    seeing ``history`` and the targets before it."""
    ids = np.concatenate([np.asarray(history, dtype=np.int64), np.asarray(targets, dtype=np.int64)])
    keys, start = match_keys(ids, loose), len(ids) - len(targets)
    lengths, shares = np.zeros(len(targets), dtype=np.int64), np.zeros(len(targets))
    for t, target in enumerate(targets):
        lengths[t], nexts = longest_match(ids[:start + t], keys=keys[:start + t])
        shares[t] = float(np.mean(nexts == target)) if len(nexts) else 0.0
    return lengths, shares


def mixture_nll(log_p: np.ndarray, targets: np.ndarray, history: np.ndarray, strength: float = 1.0,
                weights=COPY_WEIGHTS, loose: np.ndarray | None = None) -> np.ndarray:
    """(T,) NLL of each of ``targets`` under the net's ``log_p`` (T, V) mixed with the cache over ``history``
    and the targets before it: what `CopyCache` samples from, scored."""
    lengths, shares = cache_lookups(history, targets, loose)
    w = strength * np.array([weight_of(int(k), weights) for k in lengths])
    p = np.exp(log_p[np.arange(len(targets)), np.asarray(targets, dtype=np.int64)])
    return -np.log((1 - w) * p + w * shares + 1e-30)


@dataclass
class CopyCacheOptions:
    strength: float = option(1.0, "how much the filled bars may repeat the song's own bars: the scale of the fitted "
                                  "mixture weights; 0: off, the network alone", low=0, high=1, off="0")


def _make(inputs: HookInputs, o: CopyCacheOptions) -> CopyCache | None:
    tok = inputs.tokenizer
    if inputs.history is None or not o.strength:
        return None
    return CopyCache(np.concatenate([inputs.history, [tok.bar_id]]), o.strength, loose=loose_ids(tok))


# first: it mixes probabilities, and the grammar's forbidden ids stay forbidden after it
SPEC = HookSpec("copy_cache", CopyCacheOptions, ("remi",), ("infill",), _make,
                "mixes in the song's own bars around the gap where the new ones match them")
