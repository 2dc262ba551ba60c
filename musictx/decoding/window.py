"""What the net sees while `generate` samples: the window over the ids (`SlidingWindow`) and the decoder
that turns a window into the next position's logits (`WindowDecoder`).

When a window would exceed ``net.max_seq_len`` (None for the LSTM: no limit) it slides: the last
``max_seq_len - slide`` ids are kept, the cache is rebuilt by running them from scratch, and decoding goes
on. The seed stays: the prompt's last ``keep_seed`` ids (at most half of what a slide keeps) are pinned at
the start of every slid window, before the most recent ids, so that a model can still come back to the
motif it was given once the music has run past its context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor, nn

    from musictx.decoding.engine import FastDecoder


def context_length(net: nn.Module) -> int | None:
    """The longest window the net takes (``net.max_seq_len``); None for nets without a limit (LSTM)."""
    return getattr(net, "max_seq_len", None)


def window_start(start: int, length: int, max_len: int | None, keep: int, pinned: int = 0, t0: int = 0) -> int:
    """Where the recent part of the window over ids[:length] starts: unchanged while it and the ``pinned``
    prompt ids fit in ``max_len``, else it slides so that ``keep`` ids remain in all; with pinned ids the
    recent part never reaches back into the prompt (``t0`` ids) that they already hold."""
    if max_len is None or pinned + length - start <= max_len:
        return start
    return max(length - (keep - pinned), t0) if pinned else length - keep


def pinned_length(keep_seed: int | None, t0: int, keep: int) -> int:
    """How many prompt ids a slid window pins: ``keep_seed`` (None or 0: none), at most the prompt and half
    of what a slide keeps (the recent music needs room too)."""
    return min(keep_seed or 0, t0, keep // 2)


def keep_after_slide(max_len: int | None, slide: int | None) -> int:
    """How many ids a full window keeps when it slides by ``slide`` (None: a quarter of ``max_len``)."""
    if max_len is None:
        return 0
    slide = max(1, max_len // 4) if slide is None else slide
    if not 1 <= slide < max_len:
        raise ValueError(f"slide must be in 1..max_seq_len-1 = 1..{max_len - 1}, got {slide}")
    return max_len - slide


class WindowDecoder:
    """Logits of the next position, either through the net's cache or by recomputing the window. With the
    cache, a Transformer steps through `musictx.decoding` (`FastDecoder`), other nets through their forward."""

    def __init__(self, net: nn.Module, use_cache: bool, fast: FastDecoder | None = None):
        self.net, self.use_cache, self.state = net, use_cache, None
        from musictx.decoding.engine import fast_decoder  # torch's: not at import (musictx.lazy)

        self.fast = (fast or fast_decoder(net)) if use_cache else None

    def restart(self, window: Tensor) -> Tensor:
        """Run a whole window (B, T) from scratch; return the last position's logits (B, V)."""
        if self.use_cache:
            state = self.fast.init_cache() if self.fast else self.net.init_cache()
            logits, self.state = self.net(window, cache=state)
        else:
            logits = self.net(window)
        return logits[:, -1]

    @property
    def folds(self) -> bool:
        """Whether `step` feeds several new ids in one pass (a Transformer with relative attention, whose fast
        engine catches up); elsewhere the sampler asks for the logits after every id."""
        return self.fast is not None and self.fast.catches_up

    def step(self, window: Tensor, new: int = 1) -> Tensor:
        """The window grew by ``new`` ids at its end: logits (B, V) after them."""
        if not self.use_cache:
            return self.net(window)[:, -1]
        if self.fast is not None and new == 1:
            return self.fast.step(window.select(1, -1), self.state)  # select/narrow: cheaper than indexing
        if self.fast is not None and self.fast.catches_up:
            return self.fast.step_many(window.narrow(1, window.shape[1] - new, new), self.state)
        logits, self.state = self.net(window[:, -new:], cache=self.state)
        return logits[:, -1]

    def step_with(self, other: WindowDecoder, window: Tensor, other_new: Tensor, fresh: bool = False,
                  new: int = 1) -> tuple[Tensor, Tensor]:
        """`step` of this decoder over ``window`` (grown by ``new`` ids), and ``other`` (of the same net and
        engine, cached) fed ``other_new`` (B, k), ids that end in the same new id, after its cache (``fresh``:
        restarted, an empty one): one pass on the fast path (the weights are read once for both:
        `FastDecoder.step_together`, or `step_catching_up` for k > 1, a fresh cache or several new ids), else
        one after the other."""
        fast = self.fast if self.fast is not None and other.fast is self.fast else None
        if fast is not None and other_new.shape[1] == 1 and not fresh and new == 1:
            mine, theirs = fast.step_together(window.select(1, -1), [self.state, other.state])  # (B, V) each
            return mine, theirs
        if fast is not None and fast.catches_up:
            if fresh:  # an empty cache: the old one's buffers, emptied (the branch starts again every 64 ids)
                other.state = fast.init_cache() if other.state is None else fast.emptied(other.state)
            # (B,) keeps the one-id step's own kernel
            mine = window.select(1, -1) if new == 1 else window.narrow(1, window.shape[1] - new, new)
            return fast.step_catching_up(mine, self.state, other_new, other.state)
        return self.step(window, new), (other.restart(other_new) if fresh else other.extend(other_new))

    def extend(self, new: Tensor) -> Tensor:
        """A cached decoder fed ``new`` (B, k) ids at once through the net's forward: the logits (B, V) after them."""
        logits, self.state = self.net(new, cache=self.state)
        return logits[:, -1]


class SlidingWindow:
    """Which ids the net sees, and its logits after them: the recent ids from ``start`` on and, from the first
    slide after the prompt, the prompt's last ``pin`` ids pinned in front of them (module docstring), through
    ``decoder`` (a `WindowDecoder`, which a sampling hook may wrap)."""

    def __init__(self, net: nn.Module, t0: int, use_cache: bool, slide: int | None, keep_seed: int | None):
        """For a prompt of ``t0`` ids: ``slide`` ids dropped when the window is full (None: a quarter of the
        context), ``keep_seed`` prompt ids pinned after a slide (`pinned_length`)."""
        self.t0, self.max_len = t0, context_length(net)
        self.keep = keep_after_slide(self.max_len, slide)
        self.pin = pinned_length(keep_seed, t0, self.keep)
        self.pinned = self.started = False
        self.seen = 0  # ids the decoder has been fed
        self.start = window_start(0, t0, self.max_len, self.keep)
        self.decoder = WindowDecoder(net, use_cache)

    def logits(self, ids: Tensor, length: int) -> Tensor:
        """The logits (B, V) after ``ids[:, :length]``: after the prompt at the first call (the decoder starts
        on it), then after the ids written since the last call (one, or more where `steps_at` said the sampler
        could skip asking): a decoding step, or a restart from the slid window."""
        new, self.seen = length - self.seen, length
        if not self.started:
            self.started = True
            return self.decoder.restart(ids[:, self.start : length])
        recent, slid = self.advance(ids, length)
        if slid:
            return self.decoder.restart(recent)
        return self.decoder.step(recent) if new == 1 else self.decoder.step(recent, new)  # several: `folds` said so

    def steps_at(self, length: int) -> bool:
        """Whether the window over ``ids[:, :length]`` would be a step of the one before (not the prompt's first
        call, not a slide): the sampler may then skip asking for its logits and feed its last id with the next
        one, for the same window in the end."""
        folds = getattr(self.decoder, "folds", False)  # a hook's own decoder may take one id a step only
        return self.started and folds and self._next_start(length)[0] == self.start

    def _next_start(self, length: int) -> tuple[int, bool]:
        """Where the window over ``ids[:, :length]`` starts, and whether the seed is pinned from then on."""
        new_start = window_start(self.start, length, self.max_len, self.keep, self.pin if self.pinned else 0, self.t0)
        if new_start != self.start and self.pin and not self.pinned:  # the first slide: from now on the seed is pinned
            return window_start(self.start, length, self.max_len, self.keep, self.pin, self.t0), True
        return new_start, self.pinned

    def advance(self, ids: Tensor, length: int) -> tuple[Tensor, bool]:
        """The window (B, <= max_len) over ``ids[:, :length]`` after more ids, and whether it slid (the
        decoder then restarts from it)."""
        new_start, self.pinned = self._next_start(length)
        slid, self.start = new_start != self.start, new_start
        window = ids.narrow(1, new_start, length - new_start)  # (B, <= max_len - pinned ids)
        if self.pinned:
            window = torch.cat([ids[:, self.t0 - self.pin : self.t0], window], dim=1)  # the seed, then the recent music
        return window, slid
