"""Which checkpoint ``musictx-train ckpt_path=...`` resumes from, checked before any training work.

Lightning resolves ``ckpt_path=last`` (and ``best``) from its checkpoint callbacks' state, which a new
process does not have: every run also gets a new folder, so it found nothing, warned once and trained
from step 0 with exit status 0. Here ``last`` and ``best`` name the files in this run's checkpoint
folder (``hydra.run.dir=<run>`` points a run at an earlier one), and a run that finds none stops with one
line saying where it looked. Every file is read with `musictx.checkpoints.model_store.read_checkpoint` first:
Lightning unpickles checkpoints without restriction, and a truncated file would fail only after the run
was set up, with a traceback.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from musictx.checkpoints.model_store import CHECKPOINT_KEY, ModelLoadError, read_checkpoint
from musictx.checkpoints.net_specs import net_spec
from musictx.io.tokenizer import TokenizerMismatchError

# ckpt_path values that Lightning resolves from state it keeps elsewhere (SLURM, its model registry).
LIGHTNING_CKPT_NAMES = ("hpc", "registry")
NAMED = ("last", "best")
# How a message names the tokens of each tokenizer kind (a tokenizer dict's "kind"; none: Performance).
KIND_WORDS = {"performance": "Performance events", "remi": "REMI tokens"}


def resolve_resume_path(ckpt_path, ckpt_dir: str | Path) -> tuple[str | None, dict | None]:
    """(the file to resume from, its checked contents); (None, None) without ``ckpt_path``. ``last`` and
    ``best`` are looked up in ``ckpt_dir``. Raises ModelLoadError naming the file and why."""
    if not ckpt_path:
        return None, None
    name = str(ckpt_path)
    if "://" in name:
        raise ModelLoadError(f"ckpt_path={name}: resuming from a URL is refused (Lightning would unpickle "
                             "it with weights_only=False); download it and pass the local file")
    given = Path(name)
    if name in LIGHTNING_CKPT_NAMES and not given.exists():
        return name, None
    path = named_checkpoint(name, Path(ckpt_dir)) if name in NAMED and not given.exists() else given
    if not path.is_file():
        raise ModelLoadError(f"ckpt_path={name}: no such file")
    try:
        ckpt = read_checkpoint(path, map_location="cpu")
    except ModelLoadError as err:
        raise ModelLoadError(f"ckpt_path={err}" if path == given else f"ckpt_path={name}: {err}") from None
    return str(path), ckpt


def named_checkpoint(name: str, ckpt_dir: Path) -> Path:
    """``<ckpt_dir>/last.ckpt``, or the one ``best-*.ckpt`` there; a ModelLoadError says where it looked
    and how to point at another run."""
    found = [ckpt_dir / "last.ckpt"] if name == "last" else sorted(ckpt_dir.glob("best-*.ckpt"))
    found = [p for p in found if p.is_file()]
    if len(found) == 1:
        return found[0]
    what = "last.ckpt" if name == "last" else "best-*.ckpt"
    if found:
        raise ModelLoadError(f"ckpt_path={name}: {len(found)} {what} files in {ckpt_dir}; pass one of them "
                             "as ckpt_path=<file>")
    raise ModelLoadError(f"ckpt_path={name}: no {what} in {ckpt_dir} (this run's folder); resume another run "
                         f"with ckpt_path=<run>/checkpoints/last.ckpt or hydra.run.dir=<run> ckpt_path={name}")


def check_resume_fits(net: nn.Module, ckpt: dict, path) -> None:
    """Raise ModelLoadError when the checkpoint's weights do not fit the net this config built (a resume
    with other sizes than the run had), naming the fields that differ. Loads the weights into ``net``,
    which Lightning does again when it resumes."""
    state = {k[len("net."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
    try:
        net.load_state_dict(state)
    except RuntimeError:
        saved = ckpt[CHECKPOINT_KEY].get("model", {}).get("config", {})
        ours = net_spec(net)["config"]
        diff = ", ".join(f"{k}={saved[k]!r} there, {ours[k]!r} here" for k in sorted(saved)
                         if k in ours and saved[k] != ours[k])
        raise ModelLoadError(f"ckpt_path={path}: its weights do not fit the {type(net).__name__} of this config "
                             f"({diff or 'other weight names'}); resume with the settings the run had") from None


def check_resume_tokenizer(tokenizer, ckpt: dict, path, data_dir) -> None:
    """Raise ModelLoadError when the data's tokenizer is not the one the run trained with: of another kind
    (Performance events against REMI tokens), named with what to do, or with other settings, named by
    `check_compatible`. Checked before the weights, whose sizes would say only two vocabulary sizes."""
    stored = (ckpt.get(CHECKPOINT_KEY) or {}).get("tokenizer")
    if not isinstance(stored, dict):
        return  # a checkpoint without its tokenizer: the weights' check still stands
    theirs, ours = stored.get("kind", "performance"), getattr(tokenizer, "kind", "performance")
    if theirs != ours:
        raise ModelLoadError(f"ckpt_path={path}: the run learnt {KIND_WORDS.get(theirs, theirs)}, but data.dir="
                             f"{data_dir} holds {KIND_WORDS.get(ours, ours)}; resume it with data.dir set to the "
                             f"dataset it was trained on ({KIND_WORDS.get(theirs, theirs)}), or leave ckpt_path out "
                             "to start a new run on these data")
    try:
        tokenizer.check_compatible(stored, what="the checkpoint")
    except TokenizerMismatchError as err:
        raise ModelLoadError(f"ckpt_path={path}: data.dir={data_dir}: {err}; resume it with data.dir set to the "
                             "dataset it was trained on") from None
