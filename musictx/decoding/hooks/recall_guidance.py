"""Recall guidance: sample toward what the whole context adds to the recent music.

Each step the net is asked twice: with its whole window (the seed, the music so far) and with only the
window's last ``local`` ids. What the first knows and the second does not is what the model takes from
further back: the seed's figure, its pulse and key. The sampled distribution is

    log p_guided = log p_all + weight * (log p_all - log p_recent)

(contrastive, "context-aware" decoding; classifier-free guidance with the recent music as the
unconditioned branch). ``weight`` 0 is plain sampling. Guidance only re-ranks what the whole-context model
already finds plausible: tokens outside its top-``plausible`` nucleus stay impossible, so a token that
is merely unlikely after the recent ids cannot be pulled in from nowhere.

The recent branch has its own KV cache and sees the last ``local`` to ``2 * local - 1`` ids (it restarts
from the last ``local`` every ``local`` steps). The net decodes both caches in one pass
(`WindowDecoder.step_with`: `FastDecoder.step_together`, or `step_catching_up`), reading its weights once
for both. Windows no longer than ``local`` are left as they are (both branches would agree).

Which draws are guided (``draws``): on a REMI model only the Pitch draws, the one after each Program id, so
known before the net runs. In between the branch is left behind; at the next Pitch draw it takes the ids it
skipped (about 5) in the window's pass, which costs about one step more where guiding every draw costs 0.6
of a step at every draw (docs/generation.md, "What the hooks cost"). A Performance model guides every draw.

``against="continuation"`` contrasts with everything generated after the seed instead (once there are
``local`` new ids; the last ``local`` to ``2 * local - 1`` before that): what is amplified is then what the
seed alone adds, also a minute in, when most of the window is the model's own music. This branch grows
with the continuation and restarts only when the window slides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.filters import as_float, outside_nucleus, velocity_family
from musictx.decoding.hook import KINDS, DecoderWrapper, HookInputs, HookSpec
from musictx.decoding.option_fields import option, strength_option
from musictx.decoding.window import WindowDecoder
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor, nn

# what the whole window is contrasted with (module docstring)
RECALL_BRANCHES = ("recent", "continuation")
# which draws are guided: every one, or only a metrical model's Pitch draws (module docstring)
GUIDED_DRAWS = ("pitch", "every")


@dataclass
class RecallGuidanceOptions:
    # 0 samples the model's own distribution, which is what musictx-evaluate measures unless asked
    strength: float = strength_option(1.0, (
        "sample toward what the whole context (the seed) adds to the recent music: continuations come back to the "
        "seed's figure, pulse and key; 0: off"))
    local: int = option(64, "the recent ids the contrast branch sees", low=1)
    against: str = option("recent", "the contrast branch: recent (the last `local` ids) | continuation (all the "
                                    "music after the seed: amplifies what the seed alone adds)",
                          choices=RECALL_BRANCHES)
    draws: str = option("pitch", "the draws guided: pitch (a REMI model's Pitch draws, the one after each Program "
                                 "id: the branch catches up on the ids between in one pass) | every (a Performance "
                                 "model always guides every draw)", choices=GUIDED_DRAWS)


class RecallGuidance(DecoderWrapper):
    """The sampler's hook (`musictx.decoding.hook`): `around` wraps the sampler's decoder in a
    `GuidedDecoder`, which also asks the net about the recent ids; the hook's call guides the logits with
    it. `generate` makes one from its options (`of`)."""

    BRANCHES = RECALL_BRANCHES  # what the whole window is contrasted with (module docstring)

    def __init__(self, weight: float, local: int, plausible: float, against: str, leads: np.ndarray | None = None,
                 family: Tensor | None = None):
        """``leads``: (V,) bool, the ids after which the next draw is guided; None: every draw is. ``family``:
        (V,) bool, ids all plausible where one of them is (the velocities, whose value the sampler draws past
        its nucleus: `musictx.decoding.filters.sample_next`)."""
        if against not in self.BRANCHES:
            raise ValueError(f"recall guidance against must be one of {', '.join(self.BRANCHES)}, got {against!r}")
        if not weight >= 0:
            raise ValueError(f"recall guidance weight must be >= 0, got {weight}")
        if local < 1:
            raise ValueError(f"recall guidance local must be >= 1 id, got {local}")
        if not 0 < plausible <= 1:
            raise ValueError(f"recall guidance plausible must be in (0, 1], got {plausible}")
        self.weight, self.local, self.plausible, self.against = weight, local, plausible, against
        self.leads = None if leads is None else np.asarray(leads, dtype=bool)
        self.lead_list = None if leads is None else self.leads.tolist()  # the same, read per step at batch 1
        self.acts_after = self.leads  # a draw is guided only after a lead id
        self.family = family
        self.family_span = _run_of(family)  # (first, end) where the family's ids run in a row, else None
        self.decoder: GuidedDecoder | None = None

    @classmethod
    def of(cls, options: RecallGuidanceOptions, top_p: float | None, tokenizer=None,
           full_velocity: bool = False) -> RecallGuidance | None:
        """The guidance ``options`` ask for, the sampler's nucleus ``top_p`` its plausible set; None when its
        strength is 0. ``draws="pitch"`` needs a metrical ``tokenizer`` (Program ids lead to a Pitch draw).
        ``full_velocity``: the sampler draws a velocity's value past its nucleus, so every velocity is plausible
        where one is."""
        if not options.strength:
            return None
        leads = None
        if options.draws == "pitch" and getattr(tokenizer, "kind", None) == "remi":
            leads = tokenizer.type_of == "Program"  # (V,): in REMI a Program id is always followed by a Pitch
        family = velocity_family(tokenizer, "cpu") if full_velocity and top_p else None
        return cls(options.strength, options.local, top_p or 1.0, options.against, leads, family)

    def around(self, decoder, net: nn.Module, pinned: int = 0) -> GuidedDecoder:
        """``pinned``: seed ids the sampler keeps at the start of a slid window (never new music)."""
        self.decoder = GuidedDecoder(decoder, net, self, pinned)
        return self.decoder

    def __call__(self, logits: Tensor) -> Tensor:
        return self.decoder.guide(logits)


class GuidedDecoder:
    """A decoder that also asks the net about the window's recent ids: a second, cached `WindowDecoder`
    that restarts from the last ``local`` ids and grows with the window until it would hold ``2 * local``.
    `restart` and `step` return the whole window's logits as the plain decoder does; `guide` then turns
    them, once the sampler has masked what it forbids, into the guided logits.

    With the guidance's ``leads`` only the draws after a lead id are guided: between them the branch is
    left behind, and at the next guided draw it catches up on the ids it skipped in the same pass as the
    whole window's step (`WindowDecoder.step_with`)."""

    def __init__(self, decoder, net: nn.Module, guidance: RecallGuidance, pinned: int = 0):
        self.decoder, self.guidance, self.pinned = decoder, guidance, pinned
        self.recent = WindowDecoder(net, use_cache=True, fast=decoder.fast)  # the same engine: one pass for both
        self.recent_len = 0  # ids the recent branch should hold now; 0: not started
        self.fed = 0  # ids its cache holds: behind ``recent_len`` by the ids it skipped
        self.stale = True  # the branch restarted (or never started) since it last ran: it runs from scratch
        self.recent_logits: Tensor | None = None  # (B, V) after the recent ids; None: no guidance this step
        self.rows: Tensor | None = None  # (B,) bool: the rows this step guides; None: all
        self.guided_steps = 0  # steps that were guided (tests check guidance ran)
        self.new_ids = -1  # ids generated so far: each call after the first follows one new id
        self.whole_continuation = False  # whether the branch holds all new ids in the window (against=continuation)

    def restart(self, window: Tensor) -> Tensor:
        self.new_ids += 1
        self.recent_len = 0
        logits = self.decoder.restart(window)
        held = self._plan(window.shape[1])[1]  # a fresh branch never steps
        self.stale, self.recent_logits = True, None
        if held is not None and self._guided_rows(window):
            self.recent_logits = self._run_recent(window[:, -held:])
        return logits

    @property
    def folds(self) -> bool:
        return self.decoder.folds  # the branch follows several new ids as it follows one (`step`)

    def step(self, window: Tensor, new: int = 1) -> Tensor:
        """The window grew by ``new`` ids: the whole window's logits (B, V), and the branch's where the next
        draw is guided. The branch's bookkeeping follows the ids one by one, as if each had been a step."""
        length = window.shape[1]
        for back in range(new - 1, -1, -1):
            self.new_ids += 1
            action, held = self._plan(length - back)
            self.stale |= action != "step"
        self.recent_logits = None
        if held is None or not self._guided_rows(window):
            return self.decoder.step(window, new)
        # a stale branch starts again on the ids it holds, else it takes the new ids and those it skipped (between
        # restarts it grows by one id a step); the view is made only here: most steps are not guided
        fed = held if self.stale else held - self.fed
        branch = window.narrow(1, length - fed, fed)  # (B, fed >= 1)
        logits, self.recent_logits = self.decoder.step_with(self.recent, window, branch, fresh=self.stale, new=new)
        self.stale, self.fed = False, held
        return logits

    def _guided_rows(self, window: Tensor) -> bool:
        """Whether any row's next draw is guided (its last id is a lead); keeps which in ``rows`` (None: all)."""
        leads = self.guidance.leads
        if leads is None:
            return True
        last = window.select(1, -1).tolist()
        if len(last) == 1:  # batch 1: a list's item, cheaper than numpy's indexing here
            self.rows = None
            return self.guidance.lead_list[last[0]]
        guided = leads[last]  # (B,) numpy: a host lookup, cheaper than a tensor index
        self.rows = None if guided.all() else torch.from_numpy(guided).to(window.device)
        return bool(guided.any())

    def _run_recent(self, recent_window: Tensor) -> Tensor:
        """The recent branch from scratch over ``recent_window`` (B, T): its logits (B, V) after it."""
        self.stale, self.fed = False, recent_window.shape[1]
        return self.recent.restart(recent_window)

    def _plan(self, length: int) -> tuple[str | None, int | None]:
        """What the recent branch does for a window of ``length`` ids: ("restart" or "step", how many of the
        window's last ids it then holds), or (None, None) where guidance does not apply; keeps the branch's
        bookkeeping."""
        local = self.guidance.local
        new_in_window = min(self.new_ids, length - self.pinned)  # new ids are the window's tail
        if self.guidance.weight == 0 or length <= local:
            self.recent_len = 0  # the branch starts once the window outgrows it
            return None, None
        if self.guidance.against == "continuation" and local <= new_in_window < length:
            return self._continuation_plan(new_in_window)
        if self.recent_len == 0 or self.whole_continuation or self.recent_len + 1 >= 2 * local:
            self.whole_continuation, self.recent_len = False, local
            return "restart", local
        self.recent_len += 1
        return "step", self.recent_len

    def _continuation_plan(self, n: int) -> tuple[str, int]:
        """The branch over the window's last ``n`` ids, all generated: it steps while it grows by one id
        with the window, and restarts when the window slid (or the branch held only recent ids)."""
        grows = self.whole_continuation and self.recent_len and n == self.recent_len + 1
        self.recent_len, self.whole_continuation = n, True
        return ("step" if grows else "restart"), n

    def _velocities_alike(self, implausible: Tensor) -> Tensor:
        """``implausible`` (B, V) bool with every velocity (the guidance's ``family``) plausible in a row where one
        is. Where the velocities' ids run in a row (both tokenizers' do), in place on that span with torch's ops:
        numpy's, whose code is cold in the decoding loop, cost several times more there."""
        span = self.guidance.family_span
        if span is not None:
            velocities = implausible.narrow(1, span[0], span[1] - span[0])  # (B, n) a view
            if implausible.shape[0] == 1:
                if not velocities.all():
                    velocities.fill_(False)
            else:
                velocities.masked_fill_(~velocities.all(dim=1, keepdim=True), False)
            return implausible
        family = self.guidance.family
        if family.device != implausible.device:  # moved once, not at every guided draw
            self.guidance.family = family = family.to(implausible.device)
        return implausible & ~(family & (family & ~implausible).any(dim=-1, keepdim=True))

    def guide(self, logits: Tensor) -> Tensor:
        """The whole window's ``logits`` (B, V), forbidden ids already -inf, guided against the recent
        branch over the ids still allowed; unchanged where this step has no recent branch."""
        if self.recent_logits is None:
            return logits
        self.guided_steps += 1
        forbidden = logits.isneginf()  # (B, V), also where log_all is -inf: a finite logit's log-softmax is finite
        log_all = as_float(logits).log_softmax(dim=-1)
        log_recent = as_float(self.recent_logits).masked_fill(forbidden, float("-inf")).log_softmax(dim=-1)
        weight, apart = self.guidance.weight, log_all - log_recent
        guided = log_all + (apart if weight == 1 else weight * apart)  # NaN where both are -inf: masked; x 1 is exact
        plausible = self.guidance.plausible
        implausible = forbidden | outside_nucleus(log_all, plausible) if plausible < 1 else forbidden  # (B, V)
        if self.guidance.family is not None:  # every velocity plausible where one is: drawn past the nucleus
            implausible = self._velocities_alike(implausible)
        guided = guided.masked_fill(implausible, float("-inf"))
        return guided if self.rows is None else torch.where(self.rows[:, None], guided, logits)


def _run_of(family: Tensor | None) -> tuple[int, int] | None:
    """(first, end) of ``family`` (V,) bool's ids where they run in a row (``first`` .. ``end - 1``), else None."""
    if family is None:
        return None
    ids = torch.nonzero(family.cpu()).flatten().tolist()
    return (ids[0], ids[-1] + 1) if ids and ids[-1] - ids[0] == len(ids) - 1 else None


def _make(inputs: HookInputs, o: RecallGuidanceOptions) -> RecallGuidance | None:
    return RecallGuidance.of(o, inputs.sampling.top_p, inputs.tokenizer, inputs.sampling.full_velocity)


# last: it re-ranks only what the other hooks allow
SPEC = HookSpec("recall_guidance", RecallGuidanceOptions, KINDS, ("continue",),
                _make, "samples toward what the seed adds to the recent music (a second, short-context pass)")
