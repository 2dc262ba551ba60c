"""Training data: windows of a prepared dataset (see `musictx.io.token_store`) as (x, y) batches.

Never tokenizes MIDI: it reads the memory-mapped arrays and the vocabulary that data prep wrote.

- Train windows are random, validation / test windows fixed (`musictx.training.windows`: how each is
  drawn); augmentation and the recall curriculum apply to the train split only.
- ``data.mix`` (`musictx.training.mixed_windows`) draws a share of the train windows from a second
  prepared dataset, chosen per window by its own rng seeded with ``(seed, g, 1)``; validation and test
  read the main dataset only.

Batches are ``(x, y)``, two LongTensors (B, L), ``y[:, t] == x[:, t + 1]`` within a window.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import lightning as L
import numpy as np
from torch.utils.data import DataLoader, Sampler, Subset

from musictx.io.played_level import median_velocity, velocity_counts
from musictx.io.token_store import DatasetFormatError, TokenArrays, folder_problem, load_tokenizer
from musictx.models.transformer import CONTEXT
from musictx.training.infill_windows import InfillCurriculum
from musictx.training.mixed_windows import MixedWindows, MixOptions, check_mix_dir, count_text
from musictx.training.options import check_flag
from musictx.training.recall_windows import RecallCurriculum
from musictx.training.windows import FixedWindows, RandomWindows

NOT_A_PROGRAM = -2  # `programs`' mark for the ids that open no track (-1 is the drums' Program)


class WindowSampler(Sampler[int]):
    """Global window numbers of one rank for one epoch: ``epoch_windows`` per epoch over all ranks.

    Window ``i`` of this rank in epoch ``e`` is ``g = (e * n + i) * world_size + rank`` with ``n`` the
    windows per rank and epoch. `resume` makes the next iteration skip the windows already trained on.
    ``__len__`` stays the whole epoch, as Lightning counts the resumed epoch's batches from where it was.
    """

    def __init__(self, epoch_windows: int, batch_size: int, rank: int = 0, world_size: int = 1):
        # Every rank gets the same whole number of batches, so DDP ranks stay in step.
        self.per_rank = max(epoch_windows // world_size // batch_size, 1) * batch_size
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.epoch = 0
        self._skip: tuple[int, int] | None = None  # (epoch, batches to skip), used once

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume(self, epoch: int, batches_done: int) -> None:
        self.epoch = epoch
        self._skip = (epoch, batches_done)

    def __len__(self) -> int:
        return self.per_rank

    def __iter__(self):
        first = 0
        if self._skip is not None and self._skip[0] == self.epoch:
            first = min(self._skip[1] * self.batch_size, self.per_rank)
        self._skip = None
        base = self.epoch * self.per_rank
        for i in range(first, self.per_rank):
            yield (base + i) * self.world_size + self.rank


def check_options(**values) -> None:
    """Raise ValueError naming the first option (as ``data.<name>``) that is not a whole number in range:
    ``num_workers`` >= 0, the others >= 1 (``val_batch_size`` and ``epoch_windows`` may be None)."""
    for name, value in values.items():
        if value is None and name in ("val_batch_size", "epoch_windows"):
            continue
        low = 0 if name == "num_workers" else 1
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"data.{name} must be a whole number >= {low}, got {value!r}")


class MusicDataModule(L.LightningDataModule):
    """Batches of token windows from a directory written by ``musictx-prep``.

    Args:
        dir: the prepared directory (tokenizer.json, <split>.bin, <split>.idx.npy).
        seq_len: L, the model's context; windows hold L + 1 ids.
        batch_size: windows per batch (per device); ``val_batch_size`` defaults to it.
        epoch_windows: train windows per epoch over all devices; default ``num_train_tokens // L``.
        augment, max_transpose, stretch_range: train-time augmentation (`musictx.training.augment.augment_ids`).
        recall: the recall curriculum's options (`musictx.training.recall_windows.RecallCurriculum`), train only.
        infill: the infill curriculum's options (`musictx.training.infill_windows.InfillCurriculum`), train only.
        mix: ``{dir, weight}``: a second prepared dataset giving a ``weight`` share of the train windows
            (`musictx.training.mixed_windows`); off when dir is None or weight is 0.
        seed: the train windows and their augmentation are a function of (seed, window number).
    """

    def __init__(self, dir: str | os.PathLike = "data/bach", seq_len: int = CONTEXT, batch_size: int = 8,
                 val_batch_size: int | None = None, num_workers: int = 2, seed: int = 0,
                 epoch_windows: int | None = None, augment: bool = True, max_transpose: int = 3,
                 stretch_range: tuple[float, float] = (0.95, 1.05), pin_memory: bool = False,
                 recall: dict | None = None, mix: dict | None = None, infill: dict | None = None):
        super().__init__()
        check_options(seq_len=seq_len, batch_size=batch_size, val_batch_size=val_batch_size,
                      epoch_windows=epoch_windows, num_workers=num_workers)
        for name, value in (("augment", augment), ("pin_memory", pin_memory)):
            check_flag(f"data.{name}", value)
        self.dir = Path(dir)
        if problem := folder_problem(self.dir):
            raise DatasetFormatError(f"data.dir={dir}: {problem}; prepare one with musictx-prep "
                                     "(output_dir=<folder>) and pass that folder")
        self.seq_len, self.batch_size = seq_len, batch_size
        self.val_batch_size = val_batch_size or batch_size
        self.num_workers, self.seed, self.pin_memory = num_workers, seed, pin_memory
        self.epoch_windows = epoch_windows
        self.augment = dict(augment=augment, max_transpose=max_transpose, stretch_range=tuple(stretch_range))
        recall = dict(recall or {})
        if "stretch_range" in recall:
            recall["stretch_range"] = tuple(recall["stretch_range"])
        self.recall = RecallCurriculum(**recall)
        self.recall.check_fits(seq_len)
        self.infill = InfillCurriculum(**dict(infill or {}))
        # Read now: the model's vocab_size comes from here before anything is built.
        self.tokenizer = load_tokenizer(self.dir)
        if self.infill.prob and "Infill_Start" not in getattr(self.tokenizer, "vocab", {}):  # before a model is built
            raise ValueError(f"data.infill.prob={self.infill.prob}: the data in {self.dir} has no infill tokens; "
                             "prepare it with tokenizer=remi tokenizer.infill=true (musictx-prep), or set "
                             "data.infill.prob=0")
        # Checked now too, so a wrong folder or vocabulary fails before a model is built.
        self.mix = MixOptions.from_config(mix)
        self.mix_dir = check_mix_dir(self.mix.dir, self.dir, self.tokenizer) if self.mix.on else None
        self._mix_announced = False
        self.train_sampler: WindowSampler | None = None
        self._resume: dict | None = None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def programs(self) -> list[int] | None:
        """The Program numbers (-1: drums) that the train split plays, and the mix's: the parts a metrical model
        learns from this data, recorded with its weights; None for tokens without Programs (Performance events)."""
        numbers_of = getattr(self.tokenizer, "numbers_of", None)
        if numbers_of is None:
            return None
        program_of = numbers_of("Program", missing=NOT_A_PROGRAM)  # (V,)
        found: set[int] = set()
        for data_dir in [self.dir] if self.mix_dir is None else [self.dir, self.mix_dir]:
            played = np.bincount(TokenArrays(data_dir, "train").tokens, minlength=len(program_of)) > 0  # (V,)
            found |= set(program_of[played & (program_of != NOT_A_PROGRAM)].tolist())
        return sorted(found)

    def velocity(self) -> float | None:
        """How loud the train split (and the mix's) is played: the median velocity of its notes
        (`musictx.io.played_level`), recorded with the weights; None where it strikes no note."""
        values, counts = None, 0
        for data_dir in [self.dir] if self.mix_dir is None else [self.dir, self.mix_dir]:
            arrays = TokenArrays(data_dir, "train")
            values, found = velocity_counts(self.tokenizer, arrays.tokens, arrays.offsets)
            counts = counts + found  # one tokenizer (`check_mix_dir`): the same velocities
        return None if values is None else median_velocity(values, counts)

    def check_split(self, split: str, data_dir: Path | None = None) -> TokenArrays:
        """The split's arrays (of ``data_dir``, default the main dataset), after checking they fit the
        vocabulary and every piece ends with EOS."""
        data_dir = data_dir or self.dir
        arr = TokenArrays(data_dir, split)
        if len(arr) == 0:
            raise DatasetFormatError(f"{data_dir}: split {split!r} has no pieces")
        tok = self.tokenizer
        top = int(arr.tokens.max())
        if top >= tok.vocab_size:
            raise DatasetFormatError(f"{data_dir}/{split}.bin holds id {top} but tokenizer.json has "
                                     f"vocab_size {tok.vocab_size}: arrays and vocabulary do not match")
        last = np.asarray(arr.tokens[arr.offsets[1:] - 1])
        if (bad := np.flatnonzero(last != tok.eos_id)).size:
            raise DatasetFormatError(f"{data_dir}/{split}: piece {int(bad[0])} does not end with EOS "
                                     f"({tok.eos_id}); arrays and tokenizer.json do not match")
        return arr

    def setup(self, stage: str | None = None) -> None:
        splits = {"fit": ("train", "validation"), "validate": ("validation",), "test": ("test",)}
        for split in splits.get(stage, ("train", "validation", "test")):
            self.check_split(split)
            if split == "train" and self.mix_dir is not None:
                self._setup_mix()

    def _setup_mix(self) -> None:
        """Check the mix dataset's train split and say once (on rank 0) what is mixed in."""
        arr = self.check_split("train", self.mix_dir)
        if not self._mix_announced and (self.trainer is None or self.trainer.is_global_zero):
            print(f"mixing {self.mix.weight * 100:g}% of train windows from {self.mix_dir} "
                  f"({count_text(arr.num_tokens)} train tokens)")
        self._mix_announced = True

    # ----- loaders ------------------------------------------------------------------------------
    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _loader(self, dataset, batch_size: int, **kw) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, num_workers=self.num_workers,
                          pin_memory=self.pin_memory, persistent_workers=self.num_workers > 0, **kw)

    def train_windows(self) -> RandomWindows | MixedWindows:
        """The train dataset, indexed by global window number: the main dataset's windows, or with
        ``data.mix`` on, those mixed with the mix dataset's (same seed, augmentation and recall)."""
        main = RandomWindows(self.dir, "train", self.seq_len, self.tokenizer, self.seed, **self.augment,
                             recall=self.recall, infill=self.infill)
        if self.mix_dir is None:
            return main
        mix = RandomWindows(self.mix_dir, "train", self.seq_len, self.tokenizer, self.seed,
                            **self.mix.augment_of(self.augment), recall=self.recall)
        return MixedWindows(main, mix, self.mix.weight)

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank_world()
        dataset = self.train_windows()
        # The default epoch counts the main dataset's train tokens only: mixing changes what an epoch
        # holds, not how long it is, so a run's steps per epoch stay those of its main dataset.
        main_tokens = TokenArrays(self.dir, "train").num_tokens
        epoch_windows = self.epoch_windows or max(main_tokens // self.seq_len, 1)
        self.train_sampler = WindowSampler(epoch_windows, self.batch_size, rank, world)
        if self._resume is not None:
            self.train_sampler.resume(self._resume["epoch"], self._resume["batches_done"])
            self._resume = None
        # drop_last: fixed batch shapes (no recompiles); the sampler already yields whole batches.
        return self._loader(dataset, self.batch_size, sampler=self.train_sampler, drop_last=True)

    def _eval_loader(self, split: str) -> DataLoader:
        dataset = FixedWindows(self.dir, split, self.seq_len, self.tokenizer)
        rank, world = self._rank_world()
        if world > 1:  # each rank takes every world-th window; the module sums the losses over ranks
            dataset = Subset(dataset, range(rank, len(dataset), world))
        return self._loader(dataset, self.val_batch_size, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("validation")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    # ----- resume -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Data position for checkpoints: the epoch and the train batches already done in it."""
        trainer = self.trainer
        if trainer is None or self.train_sampler is None:
            return dict(self._resume or {})
        done = trainer.fit_loop.epoch_loop.batch_progress.current.processed
        return {"epoch": trainer.current_epoch, "batches_done": int(done), "seed": self.seed,
                "world_size": trainer.world_size}

    def load_state_dict(self, state: dict) -> None:
        """Called by Lightning before the loaders are built when resuming with ``ckpt_path``."""
        if not state:
            return
        if state.get("seed", self.seed) != self.seed:
            raise ValueError(f"checkpoint was trained with data seed {state['seed']}, config has {self.seed}; "
                             "resume with the same data.seed")
        self._resume = {"epoch": int(state["epoch"]), "batches_done": int(state["batches_done"])}
        world = self._rank_world()[1]
        if state.get("world_size", world) != world:
            warnings.warn(f"resuming on {world} devices a run made on {state['world_size']}: the step count "
                          "carries on, but windows are numbered per device, so the data stream differs",
                          stacklevel=2)
        # Lightning warns that a plain DataLoader cannot resume mid-epoch; this module does it itself.
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before")
        if self.train_sampler is not None:
            self.train_sampler.resume(**self._resume)
            self._resume = None
