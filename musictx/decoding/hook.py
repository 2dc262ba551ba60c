"""The hooks of `musictx.decoding.sampling.generate`: small objects that follow the ids and reshape the
logits before each draw (forbid ids, or lean toward some). The grammar guards, recall guidance, the echoes,
the leans, the copy cache and progress are hooks.

Each hook describes itself with a `HookSpec` in its own file: its options (a small dataclass of
`musictx.decoding.option_fields.option` fields, set as ``hooks.NAME.FIELD``), the tokenizer kinds and tasks
it applies to, the hooks it needs and how to make it from a run's `HookInputs` and those options.
`musictx.decoding.hooks.registry` lists the specs; its `build_hooks` is the one place a hook list is built.

A hook comes in one of four kinds, and `generate` calls, for each hook in order:

    hook.start(prompt)                   # every kind, once: the prompt (B, T0), on the net's device
    decoder = hook.around(decoder, net, pinned)   # a DecoderWrapper, once: it asks the net itself
    logits = hook(logits)                # every step: (B, V) -> (B, V), forbidden ids at -inf
    done |= hook.finished(next_ids)      # a StopRule, every step: the samples it completes, (B,) bool (None: none)
    hook.update(next_ids, done)          # every step: the ids drawn (B,), and which samples are complete (B,)
    ids = hook.only_choice()             # a Grammar, after the updates: the next ids where it leaves one, or None

A `LogitsHook` leaves the ids and the logits as they are unless it overrides ``__call__``/``update``; `generate`
calls neither where it is not overridden. A hook that reshapes only some draws says after which ids in
``acts_after`` ((V,) bool, set by ``start`` at the latest): `generate` then calls it only where a row's last id
is one of them (a pitch lean, after a Program id). A hook holds the state of one call; make a fresh one per
call. A spec that ``needs`` another hook is made after it and handed it (`HookSpec.needs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor, nn

KINDS = ("performance", "remi")  # the tokenizers' kinds (`musictx.io.tokenizers`)

_ON_HOST: tuple[Any, list[int]] = (None, [])  # the ids `generate` drew last, and their list (`read_to_host`)


def read_to_host(next_ids: Tensor | None) -> list[int]:
    """``next_ids.tolist()``, `generate`'s one read of the ids it drew, kept for `ids_on_host` until the next (None:
    forget them, at the end of a run)."""
    global _ON_HOST
    ids = [] if next_ids is None else next_ids.tolist()
    _ON_HOST = (next_ids, ids)
    return ids


def ids_on_host(next_ids: Tensor) -> list[int]:
    """``next_ids.tolist()``: the list `generate` read (`read_to_host`) where these are the ids it drew, which the
    hooks that follow the ids (``update``, ``finished``) must not change; else read now. In the decoding loop
    each tolist costs microseconds. Told by the tensor's identity: a thread that draws at the same time, or a
    caller of its own, reads its ids itself."""
    tensor, ids = _ON_HOST
    return ids if tensor is next_ids else next_ids.tolist()


class LogitsHook:
    """A hook that does nothing; subclasses override what they need."""

    # (V,) bool: the ids after which ``__call__`` may change the logits (a row's last id, the prompt's at the first
    # draw); None: after any. `generate` reads it once, after ``start``, and skips the call where no row's is one.
    acts_after: np.ndarray | None = None
    # ids that ``__call__`` sets to -inf at every draw, whatever the logits held (a grammar's PAD): where the first
    # hook called at every draw names PAD here, the sampler leaves masking it to that hook
    always_forbids: frozenset[int] = frozenset()

    def start(self, prompt: Tensor) -> None:
        """Follow the prompt (B, T0) before the first draw."""

    def __call__(self, logits: Tensor) -> Tensor:
        """The logits (B, V) of the next draw, reshaped; PAD and the earlier hooks' forbidden ids are -inf."""
        return logits

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        """Follow the ids just drawn (B,); ``done`` (B,) bool: samples complete after them."""


class StopRule(LogitsHook):
    """A hook that ends samples (a length rule): `generate` knows then that samples may end early."""

    def finished(self, next_ids: Tensor) -> Tensor | None:
        """(B,) bool: the samples the ids just drawn (B,) complete, or None where they complete none (most draws:
        `generate` then runs no op on its flags). Called before ``update``."""
        raise NotImplementedError


class Grammar(LogitsHook):
    """A hook that forbids what may not come next and can say, from the ids alone, where it leaves one id."""

    def only_choice(self) -> list[int] | None:
        """Each row's one id allowed next (after a Bar, the seed's meter); None where some row has more. Called
        after ``update``. `generate` then writes those ids without asking the net or the later hooks (the net's
        logits could not change the draw) and feeds them to the net with the next ids, in one pass."""
        raise NotImplementedError


class DecoderWrapper(LogitsHook):
    """A hook that asks the net itself: it wraps the decoder the sampler steps."""

    def around(self, decoder, net: nn.Module, pinned: int):
        """The decoder the sampler steps (``restart(window)``, ``step(window)`` -> logits (B, V)); ``pinned``:
        prompt ids a slid window keeps at its start."""
        raise NotImplementedError


class OnStep(LogitsHook):
    """A hook from a function ``fn(next_ids, done)`` called after every draw (progress reports, tests)."""

    def __init__(self, fn):
        self.fn = fn

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        self.fn(next_ids, done)


@dataclass
class HookInputs:
    """What one run's hooks are made from: the task, the tokenizer and the sampling options, and what the task
    knows of its prompt (each field is read only by the hooks that need it)."""

    task: str  # the task's name (`musictx.tasks.registry`)
    tokenizer: Any
    sampling: Any  # `SamplingOptions`: the decoding settings and ``hooks``, every hook's options (each gets its own)
    seed: Any = None  # task=continue on Performance events: the `Seed` (its notes set the guard's note cap)
    programs: list[int] = field(default_factory=list)  # metrical: the tracks the grammar lets the sampler write
    history: np.ndarray | None = None  # task=infill: the song's bars the copy cache may copy
    accompaniment: Any = None  # task=accompany: the song's given tracks and bar range (`accompany.Accompaniment`)
    on_step: Callable | None = None  # called after every draw with (next_ids, done): progress
    length_seconds: float | None = None  # Performance events: each sample ends after this much new music
    stop_after_bars: int | None = None  # REMI: a sample ends at the Bar id that would open bar this + 1
    cursor: Any = None  # metrical: the run's one view of the stream (`musictx.decoding.cursor.shared_cursor`)
    chords: Any = None  # task=continue, metrical, with chords=: the lead sheet's `Chords`, on the seed file's clock
    new_bar_lines_s: np.ndarray | None = None  # with chords: the new bars' lines (s, one more than the bars)
    candidates: int = 1  # metrical continue: rows per sample (`best_of`): row b is candidate b % candidates
    ending: bool = False  # continue: the piece closes on its key's chord (`musictx.decoding.hooks.cadence`)


@dataclass(frozen=True)
class HookSpec:
    """A hook's description of itself, for `musictx.decoding.hooks.registry`."""

    name: str
    options: type | None  # its options dataclass (``hooks.NAME.FIELD``); None: it has none
    kinds: tuple[str, ...]  # the tokenizer kinds it applies to
    tasks: tuple[str, ...] | None  # the names of the tasks it applies to; None: every task
    make: Callable[..., LogitsHook | None]  # (the run, its options, the hooks it needs) -> hook; None: nothing to do
    help: str  # one line
    needs: tuple[str, ...] = ()  # the hooks made before it and handed to ``make`` (not made: neither is this one)


def _progress(inputs: HookInputs, _options) -> LogitsHook | None:
    return OnStep(inputs.on_step) if inputs.on_step else None


PROGRESS = HookSpec("progress", None, KINDS, None, _progress, "reports each draw (progress bars, the app)")
