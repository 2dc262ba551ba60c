"""A resumed run's best checkpoints: the ones ModelCheckpoint's top-k list names, and no others.

Lightning's ModelCheckpoint removes a file that drops out of its top k only when its list (``best_k_models``,
restored from the checkpoint a run resumes from) names it, and never the file the run resumed from. So every
resumed run kept a second ``best-*.ckpt`` beside its new best, and ``ckpt_path=best`` then refused the folder:

* the list in last.ckpt does not name the best file of its own validation: `LastCheckpoint` is a plain
  callback, which Lightning runs before the checkpoint callbacks, so last.ckpt is written before that best
  file. The order stays: a run killed between the two saves keeps a whole last.ckpt of that step;
* ``ckpt_path=best`` resumes from the best file itself.

`TopKOnResume` mends both when a run resumes in its own checkpoint folder: it adds to the list the files there
that ModelCheckpoint wrote and the list does not name (each with the score its own checkpoint recorded for it),
drops the listed files that are gone, keeps the top k and removes the rest (said in one line); after each
validation it removes what ModelCheckpoint dropped from its list but left on disk.

A run resumed from another folder's checkpoint (``ckpt_path=<run A>/checkpoints/last.ckpt``, this run's folder
B) got back from Lightning the ``best_model_path`` A's file recorded, pointing into A: B's last.ckpt named it as
B's best, and a B that saved no best of its own reported it (``evaluate:`` scored it). `TopKOnResume` forgets
every path of a ModelCheckpoint's state outside its own folder when a fit starts (said in one line); the files
themselves stay where they are: nothing here removes a file outside that folder.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint

from musictx.listed import listed


class TopKOnResume(Checkpoint):
    """On a resume in ModelCheckpoint's own folder: its top-k list made to match the folder, and the files
    it drops from the list removed even when it would keep them (the file the run resumed from).

    A `Checkpoint`, added after ModelCheckpoint by `with_top_k_on_resume`: Lightning calls the checkpoint
    callbacks after all others, in their order, so its ``on_validation_end`` sees the list of the save that
    just happened."""

    def __init__(self, say: Callable[[str], None] = print):
        self.say = say
        self._listed: dict[int, set[str]] = {}  # id of a ModelCheckpoint -> the files its list named at the last look

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._listed = {}
        for saver in trainer.checkpoint_callbacks:
            forgotten = forget_other_folders(saver) if isinstance(saver, ModelCheckpoint) else []
            if forgotten and trainer.is_global_zero:
                self.say(forgotten_line(saver, forgotten, trainer.ckpt_path))
        for saver in resumed_savers(trainer):
            held = trainer.strategy.broadcast(best_files(saver) if trainer.is_global_zero else None, src=0)
            dropped = set_top_k(saver, held)
            for path in dropped:
                trainer.strategy.remove_checkpoint(path)
            if dropped and trainer.is_global_zero:
                self.say(dropped_line(saver, dropped, held))
            self._listed[id(saver)] = set(saver.best_k_models)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._remove_unlisted(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._remove_unlisted(trainer)

    def _remove_unlisted(self, trainer: L.Trainer) -> None:
        for saver in trainer.checkpoint_callbacks:
            if id(saver) in self._listed:
                for path in sorted(self._listed[id(saver)] - set(saver.best_k_models)):
                    if in_folder(path, saver.dirpath):  # never another run's file
                        trainer.strategy.remove_checkpoint(path)  # rank zero, and only a file that is there
                self._listed[id(saver)] = set(saver.best_k_models)


def resumed_savers(trainer: L.Trainer) -> list[ModelCheckpoint]:
    """The ModelCheckpoints that keep a top k in the folder of the checkpoint this fit resumed from (a run
    resumed from another run's file starts its own list, as Lightning does when the folder differs)."""
    if trainer.ckpt_path is None:
        return []
    folder = Path(trainer.ckpt_path).resolve().parent
    return [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint) and c.save_top_k != 0
            and c.dirpath is not None and Path(c.dirpath).resolve() == folder]


def best_files(saver: ModelCheckpoint) -> dict[str, float]:
    """{path: score} of the files in ``saver``'s folder that it wrote: those its list names, and those named
    like them (the literal start of its ``filename``) whose own checkpoint gives their score under its key."""
    dirpath = Path(saver.dirpath)
    on_list = {Path(p).name: s for p, s in saver.best_k_models.items() if Path(p).parent.resolve() == dirpath.resolve()}
    prefix = (saver.filename or "").split("{")[0]
    names = {p.name for p in dirpath.glob(f"{glob.escape(prefix)}*{saver.FILE_EXTENSION}")} if prefix else set()
    held = {}
    for name in sorted(names | set(on_list)):
        path = dirpath / name
        if name.startswith(".") or not path.is_file():
            continue  # a killed save's temporary, or a listed file that is gone
        score = on_list[name] if name in on_list else recorded_score(path, saver.state_key)
        if score is not None:
            held[str(path)] = float(score)  # a float, not a device tensor: rank zero broadcasts it
    return held


def recorded_score(path: Path, state_key: str) -> float | None:
    """The score a ModelCheckpoint of this ``state_key`` recorded for ``path`` in the file itself (None: it
    holds no such record, or cannot be read: then it is left alone). Memory-mapped and without pickled code:
    only the callbacks' entry is read, not the weights."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        state = (ckpt.get("callbacks") or {}).get(state_key) or {}
        scores = {Path(p).name: s for p, s in (state.get("best_k_models") or {}).items()}
        return float(scores[path.name]) if path.name in scores else None
    except Exception:  # a cut or foreign file: torch raises many kinds; it is no file of this list
        return None


def set_top_k(saver: ModelCheckpoint, held: dict[str, float]) -> list[str]:
    """Make ``saver``'s list the top k of ``held`` (with its best and k-th entries, as ModelCheckpoint keeps
    them); return the paths of ``held`` left out, best first. Nothing changes when the list already matches."""
    ranked = sorted(held, key=held.__getitem__, reverse=saver.mode == "max")
    k = len(ranked) if saver.save_top_k < 0 else saver.save_top_k
    keep, dropped = ranked[:k], ranked[k:]
    if not dropped and set(keep) == set(saver.best_k_models):
        return []
    relist(saver, {p: torch.tensor(held[p]) for p in keep}, k)
    return dropped


def relist(saver: ModelCheckpoint, scores: dict[str, torch.Tensor], k: int) -> None:
    """Make ``scores`` (at most ``k``) ``saver``'s list, with its best and k-th entries as ModelCheckpoint keeps
    them."""
    keep = sorted(scores, key=lambda p: float(scores[p]), reverse=saver.mode == "max")
    saver.best_k_models = {p: scores[p] for p in keep}
    saver.best_model_path = keep[0] if keep else ""
    saver.best_model_score = saver.best_k_models[keep[0]] if keep else None
    full = bool(keep) and len(keep) == k
    not_full = torch.tensor(torch.inf if saver.mode == "min" else -torch.inf)  # ModelCheckpoint's own k-th value then
    saver.kth_best_model_path = keep[-1] if full else ""
    saver.kth_value = saver.best_k_models[keep[-1]] if full else not_full


def in_folder(path: str, folder: str | None) -> bool:
    """Whether ``path`` lies in ``folder`` (or below it, as Lightning's own removal asks)."""
    return folder is not None and Path(path).resolve().is_relative_to(Path(folder).resolve())


def forget_other_folders(saver: ModelCheckpoint) -> list[str]:
    """Forget the paths of ``saver``'s state outside its own folder (its best, its list, its last); return them.
    Lightning restores ``best_model_path`` from any checkpoint, another run's too."""
    named = {saver.best_model_path, saver.kth_best_model_path, saver.last_model_path, *saver.best_k_models}
    foreign = sorted(p for p in named if p and not in_folder(p, saver.dirpath))
    if not foreign:
        return []
    if saver.last_model_path in foreign:
        saver.last_model_path = ""
    if set(foreign) & {saver.best_model_path, saver.kth_best_model_path, *saver.best_k_models}:
        scores = {p: s for p, s in saver.best_k_models.items() if p not in foreign}
        relist(saver, scores, len(scores) if saver.save_top_k < 0 else saver.save_top_k)
    return foreign


def forgotten_line(saver: ModelCheckpoint, forgotten: list[str], ckpt_path: str | None) -> str:
    """The one line on another folder's files a resume left out of this run's best checkpoints."""
    source = f"ckpt_path={ckpt_path}" if ckpt_path else "the checkpoint resumed from"
    return (f"checkpoints: left out {listed(forgotten)}, named by {source} but of another folder: this run's "
            f"best checkpoints are only its own, in {saver.dirpath}; that folder's files are left as they are")


def dropped_line(saver: ModelCheckpoint, dropped: list[str], held: dict[str, float]) -> str:
    """The one line on the files removed at a resume."""
    best = saver.best_model_path
    gone = ", ".join(f"{Path(p).name} ({saver.monitor} {held[p]:.4f})" for p in dropped)
    return (f"checkpoints: {Path(best).name} ({saver.monitor} {held[best]:.4f}) stays this run's best; "
            f"removed {gone}, left beside it by an earlier save (save_top_k={saver.save_top_k})")


def with_top_k_on_resume(callbacks: list[L.Callback], say: Callable[[str], None] = print) -> list[L.Callback]:
    """``callbacks`` and, when one is a ModelCheckpoint, a `TopKOnResume` after it: Lightning runs the
    checkpoint callbacks after all others, in the order given."""
    if any(isinstance(c, ModelCheckpoint) for c in callbacks):
        return [*callbacks, TopKOnResume(say)]
    return list(callbacks)
