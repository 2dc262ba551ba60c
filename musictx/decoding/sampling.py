"""Sampling from any next-token net: `generate(net, tokenizer, prompt, opts, hooks)`, one draw per step
(`filters.sample_next`); no Lightning, no Hydra.

A net maps ids (B, T) to logits (B, T, V). For incremental decoding (the protocol of `musictx.models`)
``net(ids, cache=state)`` returns ``(logits, state)`` and ``state = net.init_cache()`` starts a fresh one;
the Transformers step through `musictx.decoding`. With ``opts.use_cache=False`` the whole window is
recomputed every step (the reference). Long pieces slide the window and keep the seed pinned at its start
(`musictx.decoding.window`).

The options (`DecodingOptions`, seven fields; a run's `SamplingOptions` extends them with the hooks'
options) say how each id is drawn; the hooks (`musictx.decoding.hook`) follow the
ids and reshape the logits before each draw, in the order given. A run's hook list is built in one place,
`musictx.decoding.hooks.registry.build_hooks`; `generate` adds none of its own.

Both paths slide at the same steps, keep the same tokens and draw the same random numbers (one
exponential noise tensor (B, V) per step, Gumbel-max style), so in fp32 they give the same tokens for the
same seed. (Their logits differ by float rounding, ~1e-6; a draw that falls that close to a tie is possible
in principle, and has not been seen in the tests.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor, nn

from musictx.ctrl_c import remembered_ctrl_c
from musictx.decoding.decoding_options import DecodingOptions
from musictx.decoding.filters import NoiseStream, sample_next, velocity_family
from musictx.decoding.hook import DecoderWrapper, Grammar, LogitsHook, StopRule, read_to_host
from musictx.decoding.window import SlidingWindow


@dataclass(frozen=True)
class SpecialIds:
    """What `generate` reads of a tokenizer, for ids without one (benches, tests): PAD is never drawn and fills
    the samples that completed; EOS completes a sample. None: no such id."""

    pad_id: int | None = None
    eos_id: int | None = None


class GenerationInterrupted(KeyboardInterrupt):
    """Ctrl-C during `generate`: still a KeyboardInterrupt, carrying the ids made so far (B, T0 + n) so that
    a caller can keep the partial samples."""

    def __init__(self, ids: Tensor):
        super().__init__("generation interrupted")
        self.ids = ids


@contextmanager
def eval_mode(net: nn.Module) -> Iterator[None]:
    """Eval mode for the block (no dropout: what the net itself says), then exactly the flags it had: scoring in
    the middle of a training loop leaves the loop training, and a submodule frozen in eval mode stays so (a
    ``net.train(was_training)`` put every module back in train mode). A net already all in eval mode, the usual
    case when sampling, is left alone: setting the flags walks every module."""
    training = [module for module in net.modules() if module.training]
    if not training:
        yield
        return
    net.eval()
    try:
        yield
    finally:
        for module in training:
            module.training = True


@contextmanager
def _forget_host_ids() -> Iterator[None]:
    """The ids drawn last, kept for the hooks (`read_to_host`), forgotten when the run ends."""
    try:
        yield
    finally:
        read_to_host(None)


def _write(ids: Tensor, host, length: int, nxt: Tensor, written: list[int]) -> None:
    """The ids drawn, ``nxt`` (B,) (``written`` on the host), into column ``length`` of ``ids`` (B, capacity): through
    its numpy view ``host`` where it is on the CPU (no op), else by a copy."""
    if host is None:
        ids.select(1, length).copy_(nxt)
    elif len(written) == 1:
        host[0, length] = written[0]
    else:
        host[:, length] = written


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


def _grow(ids: Tensor, capacity: int, fill: int) -> tuple[Tensor, np.ndarray | None]:
    """``ids`` (B, T) copied into a new (B, capacity) buffer, the rest ``fill``; and its numpy view where it is on
    the CPU, which the ids drawn are written through (`_write`)."""
    out = torch.full((ids.shape[0], capacity), fill, dtype=torch.long, device=ids.device)
    out[:, : ids.shape[1]] = ids
    return out, (out.numpy() if out.is_cpu else None)


def _check_kind(i: int, hook: LogitsHook) -> None:
    """TypeError for ``hooks[i]`` that is no `LogitsHook`, or that writes ``finished`` or ``around`` without being of
    the kind that is asked for them (`StopRule`, `DecoderWrapper`, `Grammar`): the method would never be called,
    silently."""
    if not isinstance(hook, LogitsHook):
        raise TypeError(f"hooks[{i}] is a {type(hook).__name__}, not a musictx.decoding.LogitsHook: subclass "
                        "it and override __call__(logits)")
    for method, kind in (("finished", StopRule), ("around", DecoderWrapper), ("only_choice", Grammar)):
        if hasattr(hook, method) and not isinstance(hook, kind):
            raise TypeError(f"{type(hook).__name__} defines {method}() but is not a {kind.__name__}: "
                            f"subclass musictx.decoding.{kind.__name__} so that generate calls it")


def _check_inputs(net: nn.Module, prompt, opts, max_new_tokens) -> DecodingOptions:
    """A one-line error naming the argument, for what a script hands `generate` by mistake: torch, numpy or a
    hook's ``start`` said it deep inside (float ids were cut to whole numbers without a word). Returns ``opts``
    checked, as a copy (`DecodingOptions.check_decoding`: a NaN temperature drew silently, a ``top_k`` of 2.0
    failed in torch); the caller's object is left as it was."""
    if not isinstance(prompt, Tensor):
        raise TypeError(f"prompt must be a torch.Tensor of ids (B, T0), got {type(prompt).__name__}; "
                        "torch.as_tensor(ids)[None] makes one row")
    if prompt.dtype.is_floating_point or prompt.dtype.is_complex or prompt.dtype == torch.bool:
        raise TypeError(f"prompt must hold integer ids, got dtype {prompt.dtype}")
    if not isinstance(opts, DecodingOptions):
        raise TypeError(f"opts must be a DecodingOptions (or SamplingOptions), got {type(opts).__name__}")
    opts = replace(opts)  # shallow: the check sets only the decoding fields, whole-valued floats made ints
    opts.check_decoding()
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int | np.integer):
        raise TypeError(f"max_new_tokens must be a whole number, got {max_new_tokens!r}")
    if prompt.ndim == 2 and prompt.shape[0] == 0:
        raise ValueError("prompt has no rows (B = 0): nothing to sample; ask for at least one sample")
    vocab = getattr(net, "vocab_size", None)  # one read of the prompt per call: the embedding's IndexError named no id
    if vocab is not None and prompt.numel() and (int(prompt.min()) < 0 or int(prompt.max()) >= vocab):
        bad = int(prompt[(prompt < 0) | (prompt >= vocab)][0])
        raise ValueError(f"prompt holds id {bad}, outside the net's vocabulary of size {vocab} (ids of another "
                         "tokenizer?)")
    return opts


def _check_generate_args(prompt: Tensor, max_new_tokens: int, eos_id, stops: bool, pad_id, keep_seed,
                         hooks: Sequence[LogitsHook]) -> None:
    for i, hook in enumerate(hooks):
        _check_kind(i, hook)
    if prompt.ndim != 2 or prompt.shape[1] == 0:
        raise ValueError(f"prompt must be (B, T0) ids with T0 >= 1, got shape {tuple(prompt.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if (eos_id is not None or stops) and pad_id is None:
        raise ValueError("a pad id is needed to fill the samples that stop early (an EOS id or a hook that ends "
                         "samples given)")
    if keep_seed is not None and keep_seed < 0:
        raise ValueError(f"keep_seed must be >= 0 or None, got {keep_seed}")


def _noise_stream(generator: torch.Generator | None, device: torch.device, temperature: float,
                  draws: int) -> NoiseStream | None:
    """The draws' noise taken ahead (`NoiseStream`) where it comes from a CPU generator; None for greedy
    decoding (no draws) and for draws on another device's generator."""
    on_cpu = device.type == "cpu" if generator is None else generator.device.type == "cpu"
    return NoiseStream(generator, draws) if on_cpu and temperature != 0 else None


class _Drawer:
    """``draw(logits (B, V), done, hooks, last) -> ids (B,)`` as ``opts`` says, from a generator seeded with
    ``opts.seed``; ``noise``: the noise it takes ahead (None where none is taken ahead), closed when the drawer's
    block ends.
    A draw masks PAD, runs each hook of ``hooks`` (`_callers`) that acts after a row's ``last`` id, then draws;
    complete samples (``done``; None: none is) get ``pad_id``."""

    def __init__(self, opts: DecodingOptions, device: torch.device, draws: int, pad_id: int | None, tokenizer=None,
                 callers: Sequence[tuple[LogitsHook, list | None]] = ()):
        self.opts, self.pad_id = opts, pad_id
        self.masks_pad = pad_id is not None  # False where the first hook masks it at every draw (`leave_pad_to`)
        self.leave_pad_to(callers)
        self.generator = torch.Generator(device=device).manual_seed(opts.seed)
        self.noise = _noise_stream(self.generator, device, opts.temperature, draws)
        wanted = getattr(opts, "full_velocity", False) and opts.top_p
        self.velocities = velocity_family(tokenizer, device) if wanted else None

    def __call__(self, logits: Tensor, done: Tensor | None, hooks: Sequence[tuple[LogitsHook, list | None]],
                 last: list[int]) -> Tensor:
        opts, noise = self.opts, self.noise
        if self.masks_pad:
            logits.select(1, self.pad_id).fill_(float("-inf"))  # in place, without indexing's Python overhead
        one = last[0] if len(last) == 1 else None  # batch 1: a list's item, not a generator per hook
        for hook, after in hooks:
            if after is None or (after[one] if one is not None else any(after[i] for i in last)):
                logits = hook(logits)
        nxt = sample_next(logits, opts.temperature, opts.top_k, opts.top_p, self.generator,
                          noise and noise.next(logits.shape), self.velocities)  # a velocity's value past the nucleus
        return nxt if self.pad_id is None or done is None else nxt.masked_fill(done, self.pad_id)

    def __enter__(self) -> _Drawer:
        return self

    def __exit__(self, *exc) -> None:
        if self.noise is not None:  # the generator left where one call per draw would have left it
            self.noise.close()

    def leave_pad_to(self, callers: Sequence[tuple[LogitsHook, list | None]]) -> None:
        """Leave masking PAD to the first of ``callers`` where it is called at every draw and always sets PAD to
        -inf (`LogitsHook.always_forbids`): no hook before it reads the logits, so the draw is the same."""
        if callers and callers[0][1] is None and self.pad_id in callers[0][0].always_forbids:
            self.masks_pad = False

    def skip(self, shape: torch.Size) -> None:
        """Take the numbers a draw of ``shape`` (B, V) would, without drawing (an id the grammar leaves alone)."""
        if self.opts.temperature == 0:
            return
        if self.noise is not None:
            self.noise.next(shape)
        else:
            torch.empty(shape, device=self.generator.device).exponential_(generator=self.generator)


def _callers(hooks: Sequence[LogitsHook]) -> list[tuple[LogitsHook, list | None]]:
    """The hooks whose call may reshape the logits, each with its ``acts_after`` as a list of bools (None: after
    any id): a host lookup by the last id costs a fraction of a call that returns the logits as they came. A hook
    that acts after no id (a phrase return where the seed restates nothing) is left out."""
    return [(hook, None if hook.acts_after is None else np.asarray(hook.acts_after, dtype=bool).tolist())
            for hook in hooks if type(hook).__call__ is not LogitsHook.__call__
            and (hook.acts_after is None or np.any(hook.acts_after))]


def _only_choice(grammars: Sequence[Grammar], window: SlidingWindow, length: int, any_done: bool,
                 device: torch.device) -> Tensor | None:
    """The next ids (B,) where a grammar leaves each row one id (`Grammar.only_choice`), the window after ``length``
    ids would be a plain step (`SlidingWindow.steps_at`) and no row is complete (``any_done``); else None: the net
    is asked. The last such grammar in the hooks' order is asked first: a later hook's call overrides what an
    earlier one left (the given notes of an accompaniment play over the guard)."""
    if not grammars or any_done:
        return None
    for hook in reversed(grammars):
        only = hook.only_choice()  # a read: the guard keeps what it found for the draw
        if only is not None:  # the window asked only now: most ids have more than one choice
            return torch.tensor(only, device=device) if window.steps_at(length) else None
    return None


def _mark_done(done: Tensor, nxt: Tensor, written: list[int], eos_id: int | None, stoppers: Sequence[StopRule]
               ) -> bool:
    """Update ``done`` (B,) bool in place with the samples that just emitted EOS (``written``: the ids ``nxt`` on
    the host) or that a stopper completes; whether any did (told on the host: most draws run no op here)."""
    marked = False
    if eos_id is not None and eos_id in written:
        done |= nxt == eos_id
        marked = True
    for hook in stoppers:
        finished = hook.finished(nxt)
        if finished is not None:
            done |= finished
            marked = True
    return marked


@torch.inference_mode()
def generate(net: nn.Module, tokenizer, prompt: Tensor, opts: DecodingOptions, hooks: Sequence[LogitsHook] = (),
             *, max_new_tokens: int) -> Tensor:
    """Continue each row of ``prompt`` (B, T0) by up to ``max_new_tokens`` ids drawn as ``opts`` says.

    Returns (B, T0 + n) ids, prompt included, n <= max_new_tokens. ``tokenizer`` gives the special ids, its
    ``pad_id`` and ``eos_id`` (a tokenizer, or `SpecialIds`; None: neither). A sample is complete after it
    emits the EOS id (kept) or when a hook's ``finished(next_ids)`` marks it (a length rule: `SecondsLimit`,
    `BarLimit`); its later positions hold PAD, and the loop
    ends when every sample is complete. PAD is never drawn. ``hooks``: see `musictx.decoding.hook`. The
    net runs in eval mode and is put back after. A Ctrl-C while sampling raises `GenerationInterrupted` with
    the ids so far.
    """
    opts = _check_inputs(net, prompt, opts, max_new_tokens)
    pad_id, eos_id = getattr(tokenizer, "pad_id", None), getattr(tokenizer, "eos_id", None)
    stoppers = [hook for hook in hooks if isinstance(hook, StopRule)]
    _check_generate_args(prompt, max_new_tokens, eos_id, bool(stoppers), pad_id, opts.keep_seed, hooks)
    device = next(net.parameters()).device
    B, t0 = prompt.shape
    total, fill = t0 + max_new_tokens, 0 if pad_id is None else pad_id
    ids, host = _grow(prompt.to(device), min(total, t0 + FIRST_CHUNK), fill)  # (B, capacity), grown as needed
    done = torch.zeros(B, dtype=torch.bool, device=device)
    any_done = False  # whether some sample is complete: ``done`` is read only then
    can_stop = eos_id is not None or bool(stoppers)  # else no sample completes before max_new_tokens
    for hook in hooks:
        hook.start(ids[:, :t0])
    callers, followers = _callers(hooks), [hook for hook in hooks if type(hook).update is not LogitsHook.update]
    grammars = [hook for hook in hooks if isinstance(hook, Grammar)]
    gated = any(after is not None for _, after in callers)  # else no draw looks at the last ids
    last = ids[:, t0 - 1].tolist() if gated else []  # each row's last id: the hooks that act after some ids
    length = t0
    with (eval_mode(net), _forget_host_ids(), _keep_on_interrupt(lambda: ids[:, :length]) as pressed,
          _Drawer(opts, device, max_new_tokens, pad_id, tokenizer, callers) as draw):
        window = SlidingWindow(net, t0, opts.use_cache, opts.slide, opts.keep_seed)
        for hook in hooks:  # the wrappers after every start: what a hook's start sets is there for any around
            if isinstance(hook, DecoderWrapper):
                window.decoder = hook.around(window.decoder, net, window.pin)
        while length < total:
            logits = window.logits(ids, length)  # (B, V)
            nxt = draw(logits, done if any_done else None, callers, last)  # (B,)
            while True:  # the id drawn, then any that a grammar leaves alone (fed to the net with the next draw's)
                if length == ids.shape[1]:
                    ids, host = _grow(ids, min(total, length + max(FIRST_CHUNK, length - t0)), fill)
                written = read_to_host(nxt)  # the hooks that follow the ids read the same list
                _write(ids, host, length, nxt, written)
                length += 1
                if can_stop and _mark_done(done, nxt, written, eos_id, stoppers):
                    any_done = True
                for hook in followers:
                    hook.update(nxt, done)
                if gated:
                    last = written
                if length == total or (any_done and bool(done.all())):
                    return ids[:, :length]
                nxt = _only_choice(grammars, window, length, any_done, device)
                if nxt is None:
                    break
                draw.skip(logits.shape)  # the numbers its draw would have taken: later draws as without the skip
            if pressed():
                raise KeyboardInterrupt
    return ids[:, :length]
