"""The one place that loads and saves trained models, for every command.

A model reference (``load_model(ref)``) is any of:
  - the name of a model shipped inside the package (``"piano"``: ``musictx/pretrained/piano/``),
  - the name of a model folder installed beside it (``"pop-large"``: `musictx.paths.installed_models_dir`),
  - a model folder: ``config.json`` (model and tokenizer configs) + ``model.safetensors`` (+ ``README.md``),
  - a Lightning checkpoint ``.ckpt`` written by ``musictx-train``.

Nothing here runs code named by a file. Nets are built only from the project's own registry of model
classes (`musictx.models.MODELS`), with constructor arguments that must be plain JSON scalars and
parameters of that class; checkpoints are read with ``torch.load(weights_only=True)`` and model folders
with safetensors (no pickle at all).
"""

from __future__ import annotations

import contextlib
import json
import pickle
from pathlib import Path

import torch
from safetensors.torch import load_file, save
from torch import nn

from musictx.checkpoints.int8_weights import from_int8_state, to_int8_state
from musictx.checkpoints.net_specs import ModelLoadError, build_net, net_spec
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.io.tokenizers import tokenizer_from_dict
from musictx.listening.critic import CRITIC_FILE, Critic
from musictx.paths import PRETRAINED_DIR, installed_models_dir
from musictx.safe_output import atomic_path, write_text

DEFAULT_MODEL = "piano"
NATIVE_TOKENIZER_FILE = "tokenizer.json"  # a metrical model's MidiTok parameter file (config.json has it too)
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"
CHECKPOINT_KEY = "musictx"
PROGRAMS_KEY = "programs"  # the parts a metrical model learnt: the Program numbers its training data plays
VELOCITY_KEY = "velocity"  # how loud its training music is played: its notes' median velocity (played_level)
CHECKPOINT_FORMAT = 1
FOLDER_FORMAT = 1
WEIGHT_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
INT8 = "int8"  # a weights dtype too: the blocks' products in int8, the rest fp16 (`int8_weights`)
STORED_DTYPES = (*WEIGHT_DTYPES, INT8)


def _plain(value):
    """Keep only JSON-like values (checkpoints must load with ``torch.load(weights_only=True)``)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


def checkpoint_block(net: nn.Module, tokenizer: EventTokenizer, optimizer_factory) -> dict:
    """The ``"musictx"`` entry the training module adds to each Lightning checkpoint: written here, beside
    `read_checkpoint` and `load_checkpoint` that read it."""
    func = getattr(optimizer_factory, "func", optimizer_factory)
    optimizer = {"target": f"{func.__module__}.{func.__qualname__}",
                 "kwargs": _plain(dict(getattr(optimizer_factory, "keywords", {}) or {}))}
    return {"format": CHECKPOINT_FORMAT, "model": _plain(net_spec(net)), "tokenizer": tokenizer.to_dict(),
            "optimizer": optimizer, **_programs_entry(net)}


def _programs_entry(net: nn.Module) -> dict:
    """{"programs": [...]} of a net that knows the parts it learnt (``net.learnt_programs``), and {"velocity": v}
    of one that knows how loud its music is played (``net.heard_velocity``); {} for neither."""
    programs, velocity = getattr(net, "learnt_programs", None), getattr(net, "heard_velocity", None)
    return ({} if programs is None else {PROGRAMS_KEY: [int(p) for p in programs]}) | \
        ({} if velocity is None else {VELOCITY_KEY: float(velocity)})


def _set_velocity(net: nn.Module, stored, path) -> None:
    """``net.heard_velocity`` from a config's or checkpoint's "velocity" entry (None: not recorded); ModelLoadError
    for anything but a MIDI velocity."""
    if stored is not None and not (isinstance(stored, (int, float)) and 1 <= stored <= 127):
        raise ModelLoadError(f"{path}: {VELOCITY_KEY!r} must be a MIDI velocity (1 .. 127), got {stored!r}")
    net.heard_velocity = None if stored is None else float(stored)


def _set_programs(net: nn.Module, stored, path) -> None:
    """``net.learnt_programs`` from a config's or checkpoint's "programs" entry (None: not recorded, a model
    trained before it was, or one whose tokens have no Program); ModelLoadError for anything but numbers of
    General MIDI programs (-1: drums)."""
    if stored is None:
        net.learnt_programs = None
        return
    if not isinstance(stored, list) or not all(isinstance(p, int) and -1 <= p <= 127 for p in stored):
        raise ModelLoadError(f"{path}: {PROGRAMS_KEY!r} must list General MIDI program numbers (-1 .. 127), "
                             f"got {stored!r}")
    net.learnt_programs = tuple(sorted(set(stored)))


def _build(spec, path) -> nn.Module:
    """`build_net` with the file named in its errors."""
    try:
        return build_net(spec)
    except ModelLoadError as err:
        raise ModelLoadError(f"{path}: {err}") from None


# ----- Lightning checkpoints -------------------------------------------------------------------
def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """The contents of a checkpoint written by ``musictx-train``, checked: readable without pickled code,
    holding a musictx entry of a known format and only finite weights. Anything else raises
    ModelLoadError naming the file and why (``musictx-train ckpt_path=`` checks a resume file with it)."""
    _check_device(map_location)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated zip, not a zip, pickled code, unreadable file: many types
        if _is_text(path):  # torch's own words for it are a KeyError of its first byte
            raise ModelLoadError(f"{path}: a text file, not a checkpoint (.ckpt) written by musictx-train") from None
        raise ModelLoadError(f"{path}: not a usable musictx checkpoint ({type(err).__name__}: "
                             f"{_first_line(err)})") from None
    block = ckpt.get(CHECKPOINT_KEY) if isinstance(ckpt, dict) else None
    if not isinstance(block, dict):
        raise ModelLoadError(f"{path}: no {CHECKPOINT_KEY!r} entry; not a checkpoint written by musictx-train")
    if not isinstance(block.get("format", 0), int) or block.get("format", 0) > CHECKPOINT_FORMAT:
        raise ModelLoadError(f"{path}: checkpoint format {block.get('format')!r} is newer than this code "
                             f"({CHECKPOINT_FORMAT}); update musictx")
    if not isinstance(ckpt.get("state_dict"), dict):
        raise ModelLoadError(f"{path}: no 'state_dict' of weights; not a checkpoint written by musictx-train")
    check_finite(ckpt["state_dict"], path)
    return ckpt


def _is_text(path) -> bool:
    """Whether the file at ``path`` starts as printable text (a config, a note), which no checkpoint does."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        return all(32 <= b < 127 or b in b"\t\n\r" for b in f.read(512) or b"\0")
    return False


def check_finite(state: dict, path) -> None:
    """Raise ModelLoadError naming the first floating-point tensor of ``state`` that holds NaN or inf
    (a diverged run, or bits flipped on disk): such a model only ever outputs garbage."""
    for name, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            finite = torch.isfinite(value)
            if not bool(finite.all()):
                bad = value.numel() - int(finite.sum())
                raise ModelLoadError(f"{path}: parameter {name} holds {bad} non-finite value(s) (NaN or inf) "
                                     f"of {value.numel()}; the file is damaged or training diverged")


def _check_device(map_location) -> None:
    """ModelLoadError naming ``map_location`` where torch cannot put a net on it here: its own words (a list of 19
    device types, or an AssertionError) came after the file was read, or were blamed on the file."""
    try:
        torch.empty(0, device=map_location)
    except (RuntimeError, AssertionError, TypeError) as err:
        why = _first_line(err)  # short where torch says why (built without CUDA), else its list of device types
        said = "" if len(why) > 70 or why.startswith("Expected one of") else f" ({why})"
        raise ModelLoadError(f"map_location={map_location!r}: no such device here{said}; use cpu, cuda, cuda:N or "
                             "mps") from None


def _first_line(err: BaseException) -> str:
    if isinstance(err, pickle.UnpicklingError):  # torch's text: how to load it anyway, in terminal colours
        return "it holds pickled Python objects besides weights, which musictx does not load"
    text = str(err).strip()
    return text.splitlines()[0] if text else "no detail"


def _load_state(net: nn.Module, state: dict, path) -> None:
    """``net.load_state_dict(state)``, a mismatch (missing, unexpected or reshaped weights) as ModelLoadError."""
    try:
        net.load_state_dict(state)
    except RuntimeError as err:
        raise ModelLoadError(f"{path}: weights do not fit the {type(net).__name__} the file describes "
                             f"({_first_line(err)})") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu"
                    ) -> tuple[nn.Module, EventTokenizer, dict]:
    """Rebuild the trained net and its tokenizer from a checkpoint written by ``musictx-train``.

    Returns ``(net, tokenizer, meta)``: the net in eval mode on ``map_location``, the `EventTokenizer` of its
    training data, and ``meta`` = {"model", "global_step", "epoch", "hparams", "optimizer", "path"}.
    Raises ModelLoadError (file and reason named) for unreadable, foreign or non-finite checkpoints.
    """
    ckpt = read_checkpoint(path, map_location)
    block = ckpt[CHECKPOINT_KEY]
    tokenizer = _tokenizer(block, path)
    net = _build(block.get("model"), path)
    state = {k[len("net."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
    _load_state(net, state, path)
    _set_programs(net, block.get(PROGRAMS_KEY), path)
    _set_velocity(net, block.get(VELOCITY_KEY), path)
    meta = {"model": block["model"], "global_step": ckpt.get("global_step"), "epoch": ckpt.get("epoch"),
            "hparams": ckpt.get("hyper_parameters", {}), "optimizer": block.get("optimizer"), "path": str(path)}
    return net.to(map_location).eval(), tokenizer, meta


def _tokenizer(block: dict, path) -> EventTokenizer:
    try:
        return tokenizer_from_dict(block["tokenizer"])
    except (KeyError, TypeError, ValueError) as err:
        raise TokenizerMismatchError(f"{path}: unusable tokenizer entry: {err}") from err


# ----- model folders ---------------------------------------------------------------------------
def shard_groups(state: dict[str, torch.Tensor], max_bytes: int | None) -> list[list[str]]:
    """The state's keys in order, cut into groups of at most ``max_bytes`` of tensor data each (one
    tensor larger than that is a group alone); None or a state that fits: one group."""
    groups, size = [[]], 0
    for key, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if max_bytes and groups[-1] and size + nbytes > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(key)
        size += nbytes
    return groups


def save_model_folder(net: nn.Module, tokenizer: EventTokenizer, out_dir: str | Path, dtype: str = "float16",
                      info: dict | None = None, max_shard_mb: float | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (weights cast to ``dtype``) into ``out_dir``.
    ``info`` (training data, steps, measured figures) is kept in the config under "info". With
    ``max_shard_mb``, weights over that size are split into ``model-00001-of-0000N.safetensors`` files of
    at most that much each (a transfer that takes files of at most 16 MiB), listed in the config."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if dtype == INT8:
        state = to_int8_state(net, {k: v.to("cpu") for k, v in net.state_dict().items()})
    else:
        state = {k: v.detach().to("cpu", WEIGHT_DTYPES[dtype]).contiguous() for k, v in net.state_dict().items()}
    groups = shard_groups(state, int(max_shard_mb * 2**20) if max_shard_mb else None)
    names = [WEIGHTS_FILE] if len(groups) == 1 else [
        f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    for name, keys in zip(names, groups, strict=True):
        # whole or not at all; by open(): safetensors' save_file made the weights private (0600), not the umask's
        with atomic_path(out / name, "output_dir") as tmp:
            tmp.write_bytes(save({k: state[k] for k in keys}, metadata={"format": "musictx", "dtype": dtype}))
    config = {"format": FOLDER_FORMAT, "model": net_spec(net), "tokenizer": tokenizer.to_dict(),
              "weights_dtype": dtype, "info": info or {}, **_programs_entry(net)}
    if len(names) > 1:
        config["weights_files"] = names
    write_text(out / CONFIG_FILE, json.dumps(config, indent=2) + "\n", "output_dir")
    if hasattr(tokenizer, "save_native"):  # MidiTok's own parameter file too, for MidiTok users
        with atomic_path(out / NATIVE_TOKENIZER_FILE, "output_dir") as tmp:
            tokenizer.save_native(tmp)
    if getattr(net, "critic", None) is not None:  # what best_of chooses by goes with the net (`load_model_folder`)
        with atomic_path(out / CRITIC_FILE, "output_dir") as tmp:
            net.critic.save(tmp)
    return out


def _read_weights(folder: Path, config: dict) -> tuple[dict[str, torch.Tensor], Path]:
    """The folder's weights (every shard the config lists, else model.safetensors) and the path to name
    in errors; a missing, unreadable or out-of-folder shard raises ModelLoadError."""
    names = config.get("weights_files") or [WEIGHTS_FILE]
    if not isinstance(names, list) or not all(isinstance(n, str) and Path(n).name == n for n in names):
        raise ModelLoadError(f"{folder}/{CONFIG_FILE}: weights_files must list file names inside the folder")
    state: dict[str, torch.Tensor] = {}
    for name in names:
        try:
            part = load_file(folder / name)
        except Exception as err:  # missing, truncated or not a safetensors file
            raise ModelLoadError(f"{folder / name}: unreadable weights ({type(err).__name__}: "
                                 f"{_first_line(err)})") from None
        check_finite(part, folder / name)
        state.update(part)
    return state, folder / names[0] if len(names) == 1 else folder


def _dequantized(state: dict, path) -> dict:
    try:
        return from_int8_state(state)
    except ValueError as err:
        raise ModelLoadError(f"{path}: {err}") from None


def load_model_folder(folder: str | Path, map_location="cpu") -> tuple[nn.Module, EventTokenizer, dict]:
    """(net in fp32 eval mode, tokenizer, meta) of a model folder; no pickle is read."""
    folder = Path(folder)
    _check_device(map_location)
    try:
        config = json.loads((folder / CONFIG_FILE).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"{folder}: unreadable {CONFIG_FILE} ({err})") from None
    if not isinstance(config, dict) or config.get("format", 0) > FOLDER_FORMAT:
        raise ModelLoadError(f"{folder}/{CONFIG_FILE}: not a musictx model config of format <= {FOLDER_FORMAT}")
    tokenizer = _tokenizer(config, folder)
    net = _build(config.get("model"), folder / CONFIG_FILE)
    state, weights = _read_weights(folder, config)
    if config.get("weights_dtype") == INT8:
        state, net.int8_steps = _dequantized(state, weights), True  # its steps run in int8 on a CPU
    own = net.state_dict()
    _load_state(net, {k: v.to(own[k].dtype) if k in own else v for k, v in state.items()}, weights)
    _set_programs(net, config.get(PROGRAMS_KEY), folder / CONFIG_FILE)
    _set_velocity(net, config.get(VELOCITY_KEY), folder / CONFIG_FILE)
    if (folder / CRITIC_FILE).is_file():  # what best_of chooses its continuations by (musictx.tasks.critic_choice)
        try:
            net.critic = Critic.load(folder / CRITIC_FILE)
        except ValueError as err:
            raise ModelLoadError(str(err)) from None
    meta = {"model": config["model"], "info": config.get("info", {}), "path": str(folder),
            "global_step": config.get("info", {}).get("global_step")}
    return net.to(map_location).eval(), tokenizer, meta


# ----- one entry for every command -------------------------------------------------------------
def shipped_models() -> list[str]:
    """Names of the model folders installed with the package."""
    return _model_names(PRETRAINED_DIR)


def installed_models() -> list[str]:
    """Names of the model folders installed beside the package (too large for it), not shadowing a shipped one."""
    return [name for name in _model_names(installed_models_dir()) if name not in shipped_models()]


def _model_names(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / CONFIG_FILE).is_file())


def resolve(ref: str | Path | None) -> tuple[str, Path]:
    """("shipped" | "installed" | "folder" | "checkpoint", path) of a model reference; None = the default model."""
    ref = DEFAULT_MODEL if ref in (None, "") else ref
    if isinstance(ref, str) and ref in shipped_models():
        return "shipped", PRETRAINED_DIR / ref
    if isinstance(ref, str) and ref in installed_models():
        return "installed", installed_models_dir() / ref
    path = Path(ref)
    if path.is_dir():
        if not (path / CONFIG_FILE).is_file():
            raise ModelLoadError(f"{path}: a folder without {CONFIG_FILE}; not a musictx model folder")
        return "folder", path
    if path.is_file():
        return "checkpoint", path
    names = ", ".join(shipped_models()) or "none installed"
    installed = ", ".join(installed_models())  # a folder listing: once
    installed = f"; installed: {installed}" if installed else ""
    raise ModelLoadError(f"{ref}: no such file, model folder or shipped model name (shipped: {names}{installed})")


def load_model(ref: str | Path | None = None, map_location="cpu") -> tuple[nn.Module, EventTokenizer, dict]:
    """(net, tokenizer, meta) of a shipped name, a model folder or a ``.ckpt``; ``meta["source"]`` says which."""
    kind, path = resolve(ref)
    if kind == "checkpoint":
        net, tokenizer, meta = load_checkpoint(path, map_location)
    else:
        net, tokenizer, meta = load_model_folder(path, map_location)
    n_vocab = meta["model"]["config"].get("vocab_size", tokenizer.vocab_size)
    if n_vocab != tokenizer.vocab_size:
        raise TokenizerMismatchError(f"{path}: net vocab_size {n_vocab} != its tokenizer's {tokenizer.vocab_size}")
    return net, tokenizer, {**meta, "source": kind, "ref": str(ref or DEFAULT_MODEL)}


def load_pretrained(name: str = DEFAULT_MODEL, map_location="cpu") -> tuple[nn.Module, EventTokenizer]:
    """``net, tokenizer = load_pretrained("piano")``: a shipped model, ready to generate or fine-tune."""
    if not isinstance(name, str) or name not in shipped_models():  # a folder or a .ckpt: load_model's
        raise ModelLoadError(f"no shipped model {name!r} (shipped: {', '.join(shipped_models()) or 'none'}); "
                             "a model folder, a .ckpt or an installed model: musictx.load_model(...)")
    net, tokenizer, _ = load_model_folder(PRETRAINED_DIR / name, map_location)
    return net, tokenizer
