"""How `musictx.decoding.sampling.generate` draws each id: `DecodingOptions`, the general decoding settings
and all that `generate` reads of its options. Each hook's own options live in the hook's file
(`musictx.decoding.hooks.registry.HookOptions` gathers them); `SamplingOptions` holds both.
"""

from __future__ import annotations

from dataclasses import dataclass

from musictx.decoding.option_fields import check_seed, finite_number, raise_first, whole_number


@dataclass
class DecodingOptions:
    """The general decoding settings, the same for every model and task."""

    temperature: float = 1.0  # 0: greedy (argmax)
    top_k: int | None = None  # keep the k most likely ids; None: off
    top_p: float | None = 0.95  # nucleus sampling; None or 1: off
    # a velocity's value from the whole distribution of velocities, once the nucleus has drawn a velocity (a
    # metrical model's note always has one; a Performance model's VELOCITY events come among the others): the
    # nucleus cut the soft notes (docs/generation.md, "Dynamics"); False: the nucleus applies to them too
    full_velocity: bool = True
    seed: int = 0  # of the random generator: same seed and settings, same samples
    use_cache: bool = True  # False: recompute the whole window every step (the reference path, slow)
    slide: int | None = None  # ids dropped when the context is full; None: max_seq_len // 4
    keep_seed: int | None = 512  # the seed's last ids (~10 s of piano) pinned at the start of a slid window; 0: none

    def check_decoding(self) -> None:
        """Raise GenerateError naming the first bad setting: whole numbers where counts are meant (a float with
        a whole value, as Hydra reads ``1e9``, becomes an int), finite numbers in range."""
        self.seed = check_seed("seed", self.seed)  # before the model loads: torch's overflow came after
        for name in ("top_k", "slide", "keep_seed"):
            setattr(self, name, whole_number(name, getattr(self, name)))
        for name in ("temperature", "top_p"):
            finite_number(name, getattr(self, name), nullable=name == "top_p")
        raise_first([
            (not isinstance(self.full_velocity, bool),
             f"full_velocity must be true or false, got {self.full_velocity!r}"),
            (self.temperature < 0, f"temperature must be >= 0 (0 = greedy), got {self.temperature}"),
            (self.top_k is not None and self.top_k < 1, f"top_k must be >= 1 or null, got {self.top_k}"),
            (self.top_p is not None and not 0 < self.top_p <= 1, f"top_p must be in (0, 1] or null, got {self.top_p}"),
            (self.slide is not None and self.slide < 1, f"slide must be >= 1 or null, got {self.slide}"),
            (self.keep_seed is not None and self.keep_seed < 0,
             f"keep_seed must be >= 0 or null, got {self.keep_seed}"),
        ])
