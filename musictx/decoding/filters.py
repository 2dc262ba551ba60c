"""One draw per row of next-token logits: temperature, top-k and nucleus (top-p) filters, and `sample_next`.

The draw is Gumbel-max in its exponential form, argmax(p / E) with E ~ Exp(1) drawn for every entry, so
that every call takes the same random numbers whatever the filters keep. The nucleus filter needs a sort
of the row; `sample_next` skips it when the drawn id is surely in the nucleus anyway (most steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """Logits divided by ``temperature`` (> 0); below 1 sharpens, above 1 flattens."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 here (0 means greedy in `sample_next`), got {temperature}")
    return logits if temperature == 1.0 else logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row, set the rest to -inf. Ties with the k-th are kept too."""
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")
    if k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def fits_logits(row: Tensor, logits: Tensor) -> bool:
    """Whether ``row`` is on the device and in the dtype of ``logits``, told for CPU tensors without making device
    objects (in the decoding loop each costs microseconds)."""
    return row.dtype == logits.dtype and (row.is_cpu and logits.is_cpu or row.device == logits.device)


def like_logits(row: Tensor, logits: Tensor) -> Tensor:
    """``row``, made on the host, on the device and in the dtype of ``logits``: itself where it fits them already (CPU
    float32 logits), without a dispatched ``to``."""
    return row if fits_logits(row, logits) else row.to(logits.device, logits.dtype)


def as_float(logits: Tensor) -> Tensor:
    """``logits`` in float32: itself where they are (as ``.float()`` returns, without dispatching it)."""
    return logits if logits.dtype == torch.float32 else logits.float()


def add_at(logits: Tensor, rows, cols, value: float) -> Tensor:
    """``logits`` (B, V) plus ``value`` at each place (rows[i], cols[i]), once however often it is named (as
    ``logits[rows, cols] += value`` would), as a new tensor: one add of a (B, V) row of bonuses made on the host,
    which at batch 1 costs a quarter of indexing's clone and scatter. Everywhere else 0 is added, which leaves
    each logit as it was (-inf too)."""
    return logits + bonus_row(logits, rows, cols, value)


def bonus_row(logits: Tensor, rows, cols, value) -> Tensor:
    """A (B, V) row of zeros but ``value`` (or ``value[i]``) at each place (rows[i], cols[i]), made on the host, fit for
    ``logits``."""
    bonus = np.zeros(tuple(logits.shape), dtype=np.float32)
    bonus[rows, cols] = value
    return like_logits(torch.from_numpy(bonus), logits)


class KeptLeans:
    """`add_at` of one hook, its bonus rows kept once made: a hook leans toward the same few ids over and over (a
    track's Program, the next onset's Position), and a kept row is one add where a new one costs a numpy row, its
    tensor and a device check besides, each slow right after a net pass. The same floats as `add_at`."""

    MAX_KEPT = 4096  # rows kept at most (a run leans toward some hundreds of id sets); then they are made anew

    def __init__(self):
        self.kept: dict[tuple, Tensor] = {}  # a key that says the whole bonus -> (B, V) bonus

    def __call__(self, logits: Tensor, rows: list[int], cols: list[int], value: float) -> Tensor:
        """``logits`` (B, V) plus ``value`` at each place (rows[i], cols[i]), once however often it is named."""
        return self.add(logits, (tuple(rows), tuple(cols), value), lambda: bonus_row(logits, rows, cols, value))

    def add(self, logits: Tensor, key: tuple, make: Callable[[], Tensor]) -> Tensor:
        """``logits`` (B, V) plus the bonus that ``key`` stands for, which ``make`` makes (a (B, V) row fit for
        ``logits``) where it is not kept yet."""
        key = (logits.shape[0], *key)
        bonus = self.kept.get(key)
        if bonus is None or not fits_logits(bonus, logits):
            if len(self.kept) >= self.MAX_KEPT:
                self.kept.clear()
            bonus = self.kept[key] = make()
        return logits + bonus


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
    return logits.masked_fill(outside_nucleus(logits, p), float("-inf"))


def outside_nucleus(logits: Tensor, p: float) -> Tensor:
    """(..., V) bool: the ids `top_p_filter` drops at ``p`` < 1 (those it sets to -inf, but for ids already -inf)."""
    # stable: tied tokens keep their vocabulary order (the lower id ranks first), and on a vocabulary's
    # row the stable sort is also the cheaper one
    sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_above = probs.cumsum(dim=-1) - probs  # (..., V) probability of the better-ranked tokens
    drop_sorted = mass_above >= p
    return drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order


# How far inside the nucleus a shortcut's bound must be: far above the float rounding of the filter's
# cumulative sum (~1e-5 over a vocabulary), so that the filter would surely keep the id too.
NUCLEUS_MARGIN = 1e-4


def surely_in_nucleus(probs: Tensor, picks: Tensor, p: float) -> bool:
    """Whether `top_p_filter` at ``p`` keeps the id ``picks[b]`` of every row b of ``probs`` (B, V), told
    without its sort: the mass ranked above an id is at most 1 - its probability, and at most the mass of
    the ids at least as likely, less its own. False when either bound is within `NUCLEUS_MARGIN` of ``p``
    (the caller then filters). At batch 1 the pick's probability is read by torch (its ops are warm in the decoding
    loop) and the second bound, where needed, on a numpy view; at several rows both on numpy views."""
    limit = p - NUCLEUS_MARGIN
    if picks.shape[0] == 1:  # batch 1 on Python floats; the pick's probability read by torch's ops, which the
        # decoding loop keeps warm (numpy's are cold there): most draws end at the first test
        mine_one = probs.select(1, picks.item()).item()
        if 1.0 - mine_one < limit:
            return True
        row = probs.detach().numpy()[0]
        return float(row[row >= mine_one].sum()) - mine_one < limit
    rows, ids = probs.detach().numpy(), picks.numpy()  # (B, V), (B,): views, no copies
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
                family: Tensor | None = None) -> Tensor:
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
    """
    if top_p is not None:
        _check_top_p(top_p)
    logits = as_float(logits)
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    probs = logits.softmax(dim=-1)  # (B, V)
    if noise is None:
        gen_device = generator.device if generator is not None else probs.device
        noise = torch.empty(probs.shape, device=gen_device).exponential_(generator=generator)
    if not (noise.is_cpu and probs.is_cpu):  # on the host both: no op (a device is made at each read)
        noise = noise.to(probs.device)
    scores = probs / noise  # (B, V)
    picks = scores.argmax(dim=-1)  # (B,)
    if top_p is None or top_p == 1:
        return picks
    if probs.is_cpu and surely_in_nucleus(probs, picks, top_p):
        return picks  # also right where it is of the family: the best of all is the best of its family
    nucleus = (top_p_filter(logits, top_p).softmax(dim=-1) / noise).argmax(dim=-1)
    if family is None:
        return nucleus
    in_family = family[nucleus]  # (B,)
    if not bool(in_family.any()):
        return nucleus
    whole = scores.masked_fill(~family, -1.0).argmax(dim=-1)  # (B,) the family's draw past the nucleus
    return torch.where(in_family, whole, nucleus)


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
        self.rows: tuple[Tensor, ...] = ()  # the draws of the current chunk, each of the draws' shape
        self.taken = 0  # of them
        self.state_before: Tensor | None = None  # the generator's state before the current chunk

    def next(self, shape: torch.Size) -> Tensor:
        """The next draw, of ``shape`` (the same at every call)."""
        if self.taken == len(self.rows):
            n = max(1, min(self.chunk, self.draws_left))
            self.state_before = self.generator.get_state()
            # the chunk's draws as views of one tensor: a draw then takes one from a tuple, no op
            self.rows = exponential_like_torch((n, *shape), self.generator).unbind(0)
            self.taken = 0
        self.taken += 1
        self.draws_left -= 1
        return self.rows[self.taken - 1]

    def close(self) -> None:
        """Put the generator where one call per draw taken would have left it."""
        if self.taken < len(self.rows):
            self.generator.set_state(self.state_before)
            torch.empty((self.taken, *self.rows[0].shape), dtype=torch.float64).uniform_(generator=self.generator)
        self.rows = ()


def exponential_like_torch(shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
    """float32 Exp(1) numbers of ``shape``: those that ``torch.empty(shape).exponential_(generator=generator)`` gives
    on the CPU, in 0.4 of its time. Torch draws each as ``float(-log1p(-u))`` from one uniform double ``u`` of the
    generator's (`uniform_` takes the same numbers), one by one; here the uniform doubles come in one op and their
    logarithm in vector ops (equal on 80 M numbers tried; `tests/test_filters.py`)."""
    u = torch.empty(shape, dtype=torch.float64).uniform_(generator=generator)
    return u.neg_().log1p_().neg_().float()
