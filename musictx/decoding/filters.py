"""One draw per row of next-token logits: temperature (one, or one per kind of token), the truncations (top-k,
min-p, locally typical, nucleus) and `sample_next`.

The draw is Gumbel-max in its exponential form, argmax(p / E) with E ~ Exp(1) drawn for every entry, so
that every call takes the same random numbers whatever the filters keep. The nucleus filter needs a sort
of the row; `sample_next` skips it when the drawn id is surely in the nucleus anyway (most steps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor


def apply_temperature(logits: Tensor, temperature: float, per_id: Tensor | None = None) -> Tensor:
    """Logits divided by ``temperature`` (> 0); below 1 sharpens, above 1 flattens. ``per_id``: (V,) a
    factor more for each id (`kind_temperatures`: a temperature per kind of token), multiplied in."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 here (0 means greedy in `sample_next`), got {temperature}")
    if per_id is not None:
        return logits / (per_id * temperature)
    return logits if temperature == 1.0 else logits / temperature


def token_kinds(tokenizer) -> np.ndarray:
    """(V,) the kind of each id of ``tokenizer``: its ``type_of`` (REMI: Pitch, Velocity, Duration, Position,
    Program, Bar, ...; Performance events: NOTE_ON, NOTE_OFF, TIME_SHIFT, VELOCITY, ...)."""
    kinds = getattr(tokenizer, "type_of", None)
    if kinds is None:
        raise ValueError(f"{type(tokenizer).__name__} names no kind for its ids (no type_of)")
    return np.asarray(kinds)


def kind_temperatures(tokenizer, by_kind: dict | None, device="cpu") -> Tensor | None:
    """(V,) each id's temperature factor: ``by_kind[kind]`` for the kinds named, 1 for the others; None when
    none is named. A kind the vocabulary does not have is a ValueError naming the kinds it has."""
    if not by_kind:
        return None
    kinds = token_kinds(tokenizer)
    unknown = sorted(set(by_kind) - set(kinds.tolist()))
    if unknown:
        raise ValueError(f"temperature_by_kind: no token kind {', '.join(map(repr, unknown))} in this model's "
                         f"vocabulary; its kinds: {', '.join(sorted(set(kinds.tolist())))}")
    factors = np.ones(len(kinds), dtype=np.float32)
    for kind, value in by_kind.items():
        factors[kinds == kind] = float(value)
    return torch.from_numpy(factors).to(device)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row, set the rest to -inf. Ties with the k-th are kept too."""
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")
    if k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def min_p_filter(logits: Tensor, min_p: float) -> Tensor:
    """Min-p truncation (Nguyen et al. 2024): keep the ids at least ``min_p`` times as likely as the likeliest
    of their row, which keeps many ids where the model is unsure and few where it is sure."""
    if not 0 < min_p <= 1:
        raise ValueError(f"min_p must be in (0, 1], got {min_p}")
    probs = logits.softmax(dim=-1)  # (..., V)
    return logits.masked_fill(probs < min_p * probs.amax(dim=-1, keepdim=True), float("-inf"))


def typical_filter(logits: Tensor, mass: float) -> Tensor:
    """Locally typical truncation (Meister et al. 2022): keep the ids whose surprisal is nearest the row's
    entropy, the fewest of them that hold ``mass`` of the probability (as the nucleus counts: an id goes when
    those nearer already hold ``mass``)."""
    _check_top_p(mass)
    if mass == 1:
        return logits
    logp = logits.log_softmax(dim=-1)  # (..., V)
    probs = logp.exp()
    entropy = -(probs * logp.nan_to_num(neginf=0.0)).sum(dim=-1, keepdim=True)  # (..., 1)
    distance = (-logp - entropy).abs()  # inf for the ids already out
    order = distance.argsort(dim=-1, stable=True)
    sorted_probs = probs.gather(-1, order)
    drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= mass
    return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))


def _check_top_p(p: float) -> None:
    if not 0 < p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {p}")


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability reaches ``p``.

    A token is dropped when the tokens ranked above it already hold ``p`` or more of the mass, so the
    most likely token is always kept.
    """
    _check_top_p(p)
    if p == 1:
        return logits
    # stable: tied tokens keep their vocabulary order (the lower id ranks first), and on a vocabulary's
    # row the stable sort is also the cheaper one
    sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_above = probs.cumsum(dim=-1) - probs  # (..., V) probability of the better-ranked tokens
    drop_sorted = mass_above >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


# How far inside the nucleus a shortcut's bound must be: far above the float rounding of the filter's
# cumulative sum (~1e-5 over a vocabulary), so that the filter would surely keep the id too.
NUCLEUS_MARGIN = 1e-4


def surely_in_nucleus(probs: Tensor, picks: Tensor, p: float) -> bool:
    """Whether `top_p_filter` at ``p`` keeps the id ``picks[b]`` of every row b of ``probs`` (B, V), told
    without its sort: the mass ranked above an id is at most 1 - its probability, and at most the mass of
    the ids at least as likely, less its own. False when either bound is within `NUCLEUS_MARGIN` of ``p``
    (the caller then filters). On numpy views: at batch 1 this is a few microseconds."""
    rows, ids = probs.detach().numpy(), picks.numpy()  # (B, V), (B,): views, no copies
    limit = p - NUCLEUS_MARGIN
    if len(ids) == 1:  # batch 1 on Python floats: each numpy call costs more than its arithmetic here
        row, mine_one = rows[0], float(rows[0, ids[0]])
        return 1.0 - mine_one < limit or float(row[row >= mine_one].sum()) - mine_one < limit
    mine = rows[np.arange(len(ids)), ids]  # (B,)
    if (1.0 - mine < limit).all():  # most decoding steps: the id is likely enough on its own
        return True
    at_least = np.where(rows >= mine[:, None], rows, 0.0).sum(axis=1) - mine  # (B,)
    return bool((at_least < limit).all())


def velocity_family(tokenizer, device) -> Tensor | None:
    """(V,) bool: the velocity ids of ``tokenizer`` (either kind: `velocity_ids`); None for ids without one."""
    ids_of = getattr(tokenizer, "velocity_ids", None)
    if ids_of is None:
        return None
    mask = torch.zeros(tokenizer.vocab_size, dtype=torch.bool, device=device)
    mask[torch.as_tensor(ids_of(), dtype=torch.long, device=device)] = True
    return mask


def sample_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                generator: torch.Generator | None = None, noise: Tensor | None = None,
                family: Tensor | None = None, *, min_p: float | None = None, typical_p: float | None = None,
                per_id: Tensor | None = None) -> Tensor:
    """One id per row of ``logits`` (B, V). ``temperature=0`` is greedy (argmax, no random draw).

    Sampling is Gumbel-max in its exponential form, argmax(p / E) with E ~ Exp(1): every call draws
    exactly B * V numbers from ``generator``, whatever the filters leave, which keeps two decoding paths
    in step, and filtered tokens (p = 0) can never be drawn.

    With ``top_p``, the draw is first made over the unfiltered row. The nucleus only rescales the ids it
    keeps, so when that draw is one of them (`surely_in_nucleus`) it is also the filtered draw with the
    same noise; otherwise the row is filtered and drawn again with that noise. Same ids either way (up
    to float rounding), without the filter's sort on most steps.

    ``noise``: the (B, V) exponential draws to use, drawn ahead from ``generator`` (`NoiseStream`).
    ``family``: (V,) bool, ids whose value is drawn past the nucleus: where the nucleus draws one of them, the
    row's id is drawn again among them all, from their whole distribution with the same noise (the velocities:
    the nucleus decides that a velocity comes, the model's whole distribution which one).

    ``min_p`` (`min_p_filter`) and ``typical_p`` (`typical_filter`) truncate too, in that order and before
    the nucleus (each on what the one before kept); the draw is then made on what all of them keep, and
    ``family`` is drawn past all of them. ``per_id``: (V,) temperature factors, one per id (`kind_temperatures`).
    """
    if top_p is not None:
        _check_top_p(top_p)
    logits = logits.float()
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = apply_temperature(logits, temperature, per_id)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    probs = logits.softmax(dim=-1)  # (B, V)
    if noise is None:
        gen_device = generator.device if generator is not None else probs.device
        noise = torch.empty(probs.shape, device=gen_device).exponential_(generator=generator)
    noise = noise.to(probs.device)
    scores = probs / noise  # (B, V)
    picks = scores.argmax(dim=-1)  # (B,)
    nucleus_only = not min_p and (typical_p is None or typical_p == 1)
    if nucleus_only and (top_p is None or top_p == 1):
        return picks
    if nucleus_only and probs.device.type == "cpu" and surely_in_nucleus(probs, picks, top_p):
        return picks  # also right where it is of the family: the best of all is the best of its family
    nucleus = (truncated(logits, top_p, min_p, typical_p).softmax(dim=-1) / noise).argmax(dim=-1)
    if family is None:
        return nucleus
    in_family = family[nucleus]  # (B,)
    if not bool(in_family.any()):
        return nucleus
    whole = scores.masked_fill(~family, -1.0).argmax(dim=-1)  # (B,) the family's draw past the nucleus
    return torch.where(in_family, whole, nucleus)


def truncated(logits: Tensor, top_p: float | None, min_p: float | None = None, typical_p: float | None = None
              ) -> Tensor:
    """``logits`` (B, V) with what min-p, then locally typical, then nucleus truncation drop at -inf (each
    None, or 0 for min-p, or 1 for the others: off)."""
    if min_p:
        logits = min_p_filter(logits, min_p)
    if typical_p is not None and typical_p != 1:
        logits = typical_filter(logits, typical_p)
    if top_p is not None and top_p != 1:
        logits = top_p_filter(logits, top_p)
    return logits


class NoiseStream:
    """The exponential noise of `sample_next` for a run of draws of one shape, drawn ``chunk`` draws at a
    time from a CPU ``generator`` (None: torch's default one): one call per draw costs ~3x its numbers'
    share when made between decoding steps.

    The draws are the numbers that one call per draw would give (CPU ``exponential_`` takes the
    generator's numbers in order, whatever the shape), and `close` leaves the generator where one call per
    draw would have: a run that stops early gives back the numbers it drew ahead."""

    def __init__(self, generator: torch.Generator | None, draws_left: int, chunk: int = 64):
        self.generator = generator if generator is not None else torch.default_generator
        self.draws_left, self.chunk = draws_left, chunk
        self.rows: Tensor | None = None  # (n, *shape): the draws of the current chunk
        self.taken = 0  # of them
        self.state_before: Tensor | None = None  # the generator's state before the current chunk

    def next(self, shape: torch.Size) -> Tensor:
        """The next draw, of ``shape`` (the same at every call)."""
        if self.rows is None or self.taken == len(self.rows):
            n = max(1, min(self.chunk, self.draws_left))
            self.state_before = self.generator.get_state()
            self.rows = torch.empty((n, *shape)).exponential_(generator=self.generator)
            self.taken = 0
        self.taken += 1
        self.draws_left -= 1
        return self.rows[self.taken - 1]

    def close(self) -> None:
        """Put the generator where one call per draw taken would have left it."""
        if self.rows is not None and self.taken < len(self.rows):
            self.generator.set_state(self.state_before)
            torch.empty((self.taken, *self.rows.shape[1:])).exponential_(generator=self.generator)
        self.rows = None
