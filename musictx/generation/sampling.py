"""Sampling from any next-token net: `generate`, one draw per step (`filters.sample_next`); no Lightning, no Hydra.

A net maps ids (B, T) to logits (B, T, V). For incremental decoding (the protocol of `musictx.models`)
``net(ids, cache=state)`` returns ``(logits, state)`` and ``state = net.init_cache()`` starts a fresh one
(Transformers: one KV cache per layer; LSTM: the carried (h, c)). `generate` feeds one token per step
through the cache, or, with ``use_cache=False``, recomputes the whole window every step (the reference).

Context: when a window would exceed ``net.max_seq_len`` (None for the LSTM: no limit) it slides. The
last ``max_seq_len - slide`` tokens are kept, the cache is rebuilt by running them from scratch, and
decoding goes on. The seed stays: the prompt's last ``keep_seed`` tokens (at most half of what a slide
keeps) are pinned at the start of every slid window, before the most recent tokens, so that a model can
still come back to the motif it was given once the music has run past its context.

Both paths slide at the same steps, keep the same tokens and draw the same random numbers (one
exponential noise tensor (B, V) per step, Gumbel-max style), so in fp32 they give the same tokens for the
same generator seed. (Their logits differ by float rounding, ~1e-6; a draw that falls that close to a tie
is possible in principle, and has not been seen in the tests.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext

import numpy as np
import torch
from torch import Tensor, nn

from musictx.ctrl_c import remembered_ctrl_c
from musictx.decoding import FastDecoder, fast_decoder
from musictx.generation.filters import NoiseStream, sample_next

StopFn = Callable[[Tensor], Tensor]  # next ids (B,) -> (B,) bool: the sample is complete after this token
OnStep = Callable[[Tensor, Tensor], None]  # (next ids (B,), done (B,) bool), called after every step


class GenerationInterrupted(KeyboardInterrupt):
    """Ctrl-C during `generate`: still a KeyboardInterrupt, carrying the ids made so far (B, T0 + n) so that
    a caller can keep the partial samples."""

    def __init__(self, ids: Tensor):
        super().__init__("generation interrupted")
        self.ids = ids


class ShiftClock:
    """Per-sample steps of new music, counted from the TIME_SHIFT ids as they are sampled: ids
    ``first_shift .. first_shift + n_shifts - 1`` move time on by 1 .. n_shifts steps, others by none.

    Counted in numpy with a table of each id's steps: it runs once a token (as a stop and as progress),
    and a handful of torch ops on (B,) ids cost as much as a tenth of a decoding step."""

    def __init__(self, first_shift: int, n_shifts: int):
        self.first_shift, self.n_shifts = first_shift, n_shifts
        # steps of each id up to the last TIME_SHIFT, then one entry (0) that every later id reads
        self._steps_of = np.zeros(first_shift + n_shifts + 1, dtype=np.int64)
        self._steps_of[first_shift : first_shift + n_shifts] = np.arange(1, n_shifts + 1)
        self.steps: np.ndarray | None = None  # (B,) steps generated so far

    @classmethod
    def of(cls, tokenizer) -> ShiftClock:
        """The clock of an `EventTokenizer`'s TIME_SHIFT ids."""
        lay = tokenizer.layout
        return cls(lay.time_shift, lay.velocity - lay.time_shift)

    def add(self, next_ids: Tensor) -> np.ndarray:
        """Count the ids (B,) just sampled; returns the steps (B,) so far."""
        ids = next_ids.cpu().numpy()
        shift = self._steps_of[np.minimum(ids, len(self._steps_of) - 1)]  # (B,)
        self.steps = shift if self.steps is None else self.steps + shift
        return self.steps


class SecondsLimit:
    """A ``stop_fn`` for `generate`: a sample is complete once its new TIME_SHIFTs reach ``seconds``.

    Counts the steps of every new TIME_SHIFT id per sample (`ShiftClock`). The shift that reaches the limit
    is kept, so the new material lasts at least ``seconds`` and less than ``seconds`` plus one shift. Make a
    fresh one per call.
    """

    def __init__(self, seconds: float, time_step: float, first_shift: int, n_shifts: int):
        if seconds <= 0:
            raise ValueError(f"length_seconds must be > 0, got {seconds}")
        self.limit_steps = max(1, round(seconds / time_step))
        self.clock = ShiftClock(first_shift, n_shifts)

    @classmethod
    def of(cls, tokenizer, seconds: float) -> SecondsLimit:
        """The limit for an `EventTokenizer`'s TIME_SHIFT ids."""
        clock = ShiftClock.of(tokenizer)
        return cls(seconds, tokenizer.config.time_step, clock.first_shift, clock.n_shifts)

    @property
    def steps(self) -> np.ndarray | None:
        """(B,) steps generated so far; None before the first call."""
        return self.clock.steps

    def __call__(self, next_ids: Tensor) -> Tensor:
        return torch.from_numpy(self.clock.add(next_ids) >= self.limit_steps).to(next_ids.device)


class ProgressPrinter:
    """An ``on_step`` for `generate` that prints, every ``every_s`` seconds of wall clock, the seconds of new
    music of the least advanced sample still running, so that a long run shows that it is moving."""

    def __init__(self, tokenizer, length_seconds: float | None, every_s: float):
        self.clock = ShiftClock.of(tokenizer)
        self.time_step, self.length, self.every_s = tokenizer.config.time_step, length_seconds, every_s
        self.t0 = self.last = time.monotonic()

    def __call__(self, next_ids: Tensor, done: Tensor) -> None:
        steps = self.clock.add(next_ids)  # (B,)
        now = time.monotonic()
        if now - self.last < self.every_s or bool(done.all()):
            return
        self.last = now
        seconds = steps[~done.cpu().numpy()].min() * self.time_step
        of = f" of {self.length:g} s" if self.length else ""
        print(f"generating: {seconds:.1f} s{of} so far ({int(done.sum())} of {len(done)} samples done, "
              f"{now - self.t0:.0f} s)", flush=True)


def context_length(net: nn.Module) -> int | None:
    """The longest window the net takes (``net.max_seq_len``); None for nets without a limit (LSTM)."""
    return getattr(net, "max_seq_len", None)


# Prompt tokens pinned at the start of a slid window (the seed's last ~10 s of piano); 0 turns it off.
KEEP_SEED = 512


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


def _keep_after_slide(max_len: int | None, slide: int | None) -> int:
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
        self.fast = (fast or fast_decoder(net)) if use_cache else None

    def restart(self, window: Tensor) -> Tensor:
        """Run a whole window (B, T) from scratch; return the last position's logits (B, V)."""
        if self.use_cache:
            state = self.fast.init_cache() if self.fast else self.net.init_cache()
            logits, self.state = self.net(window, cache=state)
        else:
            logits = self.net(window)
        return logits[:, -1]

    def step(self, window: Tensor) -> Tensor:
        """The window grew by one id at its end: logits (B, V) after it."""
        if not self.use_cache:
            return self.net(window)[:, -1]
        if self.fast is not None:
            return self.fast.step(window[:, -1], self.state)
        logits, self.state = self.net(window[:, -1:], cache=self.state)
        return logits[:, -1]

    def step_with(self, other: WindowDecoder, window: Tensor, other_window: Tensor) -> tuple[Tensor, Tensor]:
        """`step` of this decoder over ``window`` and of ``other`` (of the same net and engine) over
        ``other_window``, two windows that end in the same new id: one pass on the fast path
        (`FastDecoder.step_together`: the weights are read once for both), else one step after the other."""
        if self.fast is None or other.fast is not self.fast:
            return self.step(window), other.step(other_window)
        mine, theirs = self.fast.step_together(window[:, -1], [self.state, other.state])  # (B, V) each
        return mine, theirs


@contextmanager
def _eval_mode(net: nn.Module) -> Iterator[None]:
    """Eval mode for the block; the net's train flag is put back."""
    was_training = net.training
    net.eval()
    try:
        yield
    finally:
        net.train(was_training)


@contextmanager
def _keep_on_interrupt(ids_so_far: Callable[[], Tensor]) -> Iterator[Callable[[], bool]]:
    """A Ctrl-C inside the block becomes a `GenerationInterrupted` holding ``ids_so_far()``. Yields
    ``pressed()`` for the loop to ask between steps: a KeyboardInterrupt raised inside a GC callback is
    swallowed by Python, and only the remembered signal then stops the sampling (`musictx.ctrl_c`)."""
    try:
        with remembered_ctrl_c() as pressed:
            yield pressed
    except KeyboardInterrupt:
        raise GenerationInterrupted(ids_so_far()) from None


# Room for this many new ids at first; then the room for new ids doubles whenever it is full. A huge
# max_new_tokens (a bound, rarely reached when EOS or length_seconds stops the samples) so costs no
# memory for ids that are never generated.
FIRST_CHUNK = 1024


def _grow(ids: Tensor, capacity: int, fill: int) -> Tensor:
    """``ids`` (B, T) copied into a new (B, capacity) buffer, the rest ``fill``."""
    out = torch.full((ids.shape[0], capacity), fill, dtype=torch.long, device=ids.device)
    out[:, : ids.shape[1]] = ids
    return out


class _Window:
    """Which ids the decoder sees: the recent ids from ``start`` on, and, from the first slide after the
    prompt, the prompt's last ``pin`` ids pinned in front of them (see the module docstring)."""

    def __init__(self, t0: int, max_len: int | None, keep: int, pin: int):
        self.t0, self.max_len, self.keep, self.pin = t0, max_len, keep, pin
        self.pinned = False
        self.start = window_start(0, t0, max_len, keep)

    def advance(self, ids: Tensor, length: int) -> tuple[Tensor, bool]:
        """The window (B, <= max_len) over ``ids[:, :length]`` after one more id, and whether it slid (the
        decoder then restarts from it)."""
        new_start = window_start(self.start, length, self.max_len, self.keep, self.pin if self.pinned else 0, self.t0)
        if new_start != self.start and self.pin and not self.pinned:  # the first slide: from now on the seed is pinned
            self.pinned, new_start = True, window_start(self.start, length, self.max_len, self.keep, self.pin, self.t0)
        slid, self.start = new_start != self.start, new_start
        window = ids[:, new_start:length]  # (B, <= max_len - pinned ids)
        if self.pinned:
            window = torch.cat([ids[:, self.t0 - self.pin : self.t0], window], dim=1)  # the seed, then the recent music
        return window, slid


def _check_generate_args(prompt_ids: Tensor, max_new_tokens: int, eos_id, stop_fn, pad_id, keep_seed) -> None:
    if prompt_ids.ndim != 2 or prompt_ids.shape[1] == 0:
        raise ValueError(f"prompt_ids must be (B, T0) with T0 >= 1, got shape {tuple(prompt_ids.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if (eos_id is not None or stop_fn is not None) and pad_id is None:
        raise ValueError("pad_id is needed to fill the samples that stop early (eos_id or stop_fn given)")
    if keep_seed is not None and keep_seed < 0:
        raise ValueError(f"keep_seed must be >= 0 or None, got {keep_seed}")


def _draw(logits: Tensor, draw: Callable[[Tensor], Tensor], done: Tensor | None, pad_id: int | None, guard,
          guide: Callable[[Tensor], Tensor] | None) -> Tensor:
    """The next ids (B,) from ``logits`` (B, V): PAD and what ``guard`` forbids masked, then ``guide``
    (recall guidance), then ``draw``; complete samples (``done``; None: none can be) get ``pad_id``."""
    if pad_id is not None:
        logits.select(1, pad_id).fill_(float("-inf"))  # in place, without indexing's Python overhead
    if guard is not None:
        logits = guard.mask(logits)
    if guide is not None:
        logits = guide(logits)  # after the masks: it re-ranks only what may be drawn
    nxt = draw(logits)
    if pad_id is not None and done is not None:
        nxt = nxt.masked_fill(done, pad_id)
    if guard is not None:
        guard.update(nxt)
    return nxt


def _noise_stream(generator: torch.Generator | None, device: torch.device, temperature: float,
                  draws: int) -> NoiseStream | None:
    """The draws' noise taken ahead (`NoiseStream`) where it comes from a CPU generator; None for greedy
    decoding (no draws) and for draws on another device's generator."""
    on_cpu = device.type == "cpu" if generator is None else generator.device.type == "cpu"
    return NoiseStream(generator, draws) if on_cpu and temperature != 0 else None


def _mark_done(done: Tensor, nxt: Tensor, eos_id: int | None, stop_fn: StopFn | None) -> Tensor:
    """``done`` (B,) bool, updated in place: samples that just emitted EOS or that ``stop_fn`` completes."""
    if eos_id is not None:
        done |= nxt == eos_id
    if stop_fn is not None:
        done |= stop_fn(nxt)
    return done


@torch.inference_mode()
def generate(net: nn.Module, prompt_ids: Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
             pad_id: int | None = None, use_cache: bool = True, generator: torch.Generator | None = None,
             stop_fn: StopFn | None = None, slide: int | None = None, guard=None,
             keep_seed: int | None = KEEP_SEED, on_step: OnStep | None = None, guidance=None) -> Tensor:
    """Continue each row of ``prompt_ids`` (B, T0) by up to ``max_new_tokens`` sampled ids.

    Returns (B, T0 + n) ids, prompt included, n <= max_new_tokens. A sample is complete after it emits
    ``eos_id`` (kept) or when ``stop_fn(next_ids)`` marks it; its later positions hold ``pad_id``, and the
    loop ends when every sample is complete. ``pad_id`` is also never sampled. ``slide``: how many ids a
    full window drops (default ``max_seq_len // 4``); ``keep_seed``: prompt ids pinned at the start of a
    slid window (module docstring; None or 0: none). ``guard`` (e.g. `NoteGrammarGuard`) follows the ids
    and masks forbidden ones before each draw; ``guidance`` (e.g. `RecallGuidance`) wraps the decoder and
    reshapes its logits after the masks, before the filters; ``on_step(next_ids, done)`` is called after
    every step (progress reports). The net runs in eval mode and is put back after. A Ctrl-C while
    sampling raises `GenerationInterrupted` with the ids so far.
    """
    _check_generate_args(prompt_ids, max_new_tokens, eos_id, stop_fn, pad_id, keep_seed)
    max_len = context_length(net)
    keep = _keep_after_slide(max_len, slide)
    device = next(net.parameters()).device
    B, t0 = prompt_ids.shape
    pin = pinned_length(keep_seed, t0, keep)
    total = t0 + max_new_tokens
    fill = 0 if pad_id is None else pad_id
    ids = _grow(prompt_ids.to(device), min(total, t0 + FIRST_CHUNK), fill)  # (B, capacity), grown as needed
    done = torch.zeros(B, dtype=torch.bool, device=device)
    can_stop = eos_id is not None or stop_fn is not None  # else no sample completes before max_new_tokens
    decoder, guide = WindowDecoder(net, use_cache), None
    if guidance is not None:
        decoder = guidance.around(decoder, net, pinned=pin)
        guide = decoder.guide
    if guard is not None:
        guard.start(prompt_ids.to(device))

    noise = _noise_stream(generator, device, temperature, max_new_tokens)

    def draw(logits: Tensor) -> Tensor:
        return sample_next(logits, temperature, top_k, top_p, generator, noise and noise.next(logits.shape))

    window = _Window(t0, max_len, keep, pin)
    length = t0
    with (_eval_mode(net), closing(noise) if noise else nullcontext(),
          _keep_on_interrupt(lambda: ids[:, :length]) as pressed):
        logits = decoder.restart(ids[:, window.start : t0])
        while length < total:
            nxt = _draw(logits, draw, done if can_stop else None, pad_id, guard, guide)  # (B,)
            if length == ids.shape[1]:
                ids = _grow(ids, min(total, length + max(FIRST_CHUNK, length - t0)), fill)
            ids.select(1, length).copy_(nxt)
            length += 1
            done = _mark_done(done, nxt, eos_id, stop_fn)
            if on_step is not None:
                on_step(nxt, done)
            if length == total or (can_stop and bool(done.all())):
                break
            if pressed():
                raise KeyboardInterrupt
            recent, slid = window.advance(ids, length)
            logits = decoder.restart(recent) if slid else decoder.step(recent)
    return ids[:, :length]
