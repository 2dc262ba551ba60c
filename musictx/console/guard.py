"""One-line errors for every command, and the checks that run before Hydra makes a run folder.

Each command used to catch its own few error classes, so the rest ended in tracebacks (evaluate 11 lines,
export 13), a mistyped key got Hydra's several-line struct error everywhere but generate, and a refused
run left its empty folder behind. Here:

- `before_hydra` composes the command's config with Hydra's compose API before ``@hydra.main`` runs: a
  mistyped key or group choice ends in one line with the nearest name, and the command's own refusals
  (`musictx.safe_output`, a training run folder that holds a run) come before Hydra creates or writes into
  the run folder, so a refused run leaves nothing behind and replaces nothing;
- `command_guard` wraps the work: the errors a user can fix become ``<prog>: error: <one line>`` on stderr,
  exit status 1, and a run folder this run made that holds only Hydra's own files is removed.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from musictx.decoding.errors import GenerateError
from musictx.io.chord_labels import ChordFileError
from musictx.io.midi_io import MidiReadError
from musictx.io.token_store import DatasetFormatError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.io.wav_io import AudioRenderError
from musictx.paths import CONF_DIR
from musictx.safe_output import (
    FULL_DISK,
    OutputError,
    check_target,
    check_writable,
    command_run,
    full_disk_error,
)
from musictx.user_error import UserError

# What a user can fix from the message alone: `UserError` (the model store's, evaluation's, training's), and these.
# (PrepError is a ValueError of data_prep, added by musictx-prep.)
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError, OutputError, GenerateError, MidiReadError, TokenizerMismatchError, DatasetFormatError,
    AudioRenderError, ChordFileError)
DEBUG_ENV = "MUSICTX_DEBUG"  # set to 1: an unexpected error shows its traceback instead of one line
HYDRA_FILES = {".hydra"}  # what Hydra writes into a run folder before the command runs (and its *.log)
# set by before_hydra: whether the run folder existed, and the outermost of its folders that did not (Hydra
# makes outputs/train/<date>/<time> whole); True and None (keep everything) when it did not run
_state: dict = {"run_dir_existed": True, "first_new": None}


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _flat_keys(cfg, prefix: str = "") -> list[str]:
    keys = []
    for key, value in (cfg.items() if isinstance(cfg, dict) else []):
        name = f"{prefix}{key}"
        keys.append(name)
        keys += _flat_keys(value, f"{name}.")
    return keys


def _chosen_configs(overrides) -> list[str]:
    """The overrides that choose a config of a group (``model=lstm``, ``+experiment=tiny``): they decide which
    keys a run has, so a hint from the default choices named keys the run did not have (n_heads for an LSTM)."""
    return [arg for arg in overrides or () if "=" in arg
            and (Path(CONF_DIR) / arg.lstrip("+~").partition("=")[0]).is_dir()]


def _composed(config_name: str, chosen: list[str]) -> tuple[list[str], dict]:
    """The keys of the config ``chosen`` composes, and its group choices (an experiment may choose the model)."""
    with _composing():
        cfg = compose(config_name=config_name, overrides=chosen, return_hydra_config=True)
    choices = dict(cfg.hydra.runtime.choices)
    return [k for k in _flat_keys(OmegaConf.to_container(cfg, resolve=False)) if k.split(".")[0] != "hydra"], choices


def _run_keys(config_name: str, overrides) -> tuple[list[str], dict, list[str]]:
    chosen = _chosen_configs(overrides)
    try:
        return *_composed(config_name, chosen), chosen
    except (HydraException, OmegaConfBaseException):  # a choice that cannot compose alone: the defaults' keys
        return *_composed(config_name, []), []


def _choices_with(key: str, group: str, config_name: str, chosen: list[str]) -> list[str]:
    """The other configs of ``group`` that have ``key`` (model.net.n_heads: the transformers, not lstm)."""
    others = [a for a in chosen if a.lstrip("+~").partition("=")[0] != group]
    having = []
    for name in sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml")):
        try:
            if key in _composed(config_name, [*others, f"{group}={name}"])[0]:
                having.append(name)
        except (HydraException, OmegaConfBaseException):
            continue
    return having


def key_message(err: BaseException, config_name: str, overrides: list[str] | None = None) -> str:
    """A mistyped key or group choice, said in one line with the nearest name there is among the keys of the
    configs the run chose (``overrides``: its command line)."""
    text = str(err)
    group = re.search(r"Could not find '([^'/]+)/([^']+)'", text)  # the group: up to the first /
    if group:
        names = sorted(p.stem for p in (Path(CONF_DIR) / group[1]).glob("*.yaml"))
        close = difflib.get_close_matches(group[2], names, n=1)
        hint = f"did you mean {group[1]}={close[0]}?" if close else f"one of: {', '.join(names)}"
        return f"{group[1]}={group[2]}: no such choice; {hint}"
    found = re.search(r"Could not override '([^']+)'", text) or re.search(r"[Kk]ey '([^']+)'", text)
    key = found[1] if found else getattr(err, "full_key", None) or "?"
    known, choices, chosen = _run_keys(config_name, overrides)
    if key in known and (Path(CONF_DIR) / key).is_dir():  # an option that shares its name with a config group
        return (f"{key}=...: Hydra reads '{key}' as the config group conf/{key}/ here, so this option cannot be "
                f"given on the command line; leave it out (conf/{config_name}.yaml sets it)")
    top = key.split(".")[0]
    having = _choices_with(key, top, config_name, chosen) if choices.get(top) and key not in known else []
    if having:  # a key of another choice: the nearest key of this one would be a wrong guess (n_heads -> n_layers)
        having.sort(key=lambda name: (len(name), name))  # the plain configs first, not their _small, _piano kin
        more = f" and {len(having) - 3} more" if len(having) > 3 else ""
        return (f"unknown key '{key}': {top}={choices[top]} has no such key ({top}={', '.join(having[:3])}{more} "
                f"{'has' if len(having) == 1 else 'have'} it); conf/{top}/{choices[top]}.yaml lists its keys")
    close = difflib.get_close_matches(key, known, n=1) or difflib.get_close_matches(key.split(".")[-1],
                                                                                    known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"conf/{config_name}.yaml lists the keys"
    return f"unknown key '{key}'; {hint}"


@contextmanager
def _composing() -> Iterator[None]:
    GlobalHydra.instance().clear()  # a compose earlier in this process (tests) must not be in the way
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


def compose_run_config(config_name: str, overrides: list[str]) -> DictConfig:
    """The config a run of ``overrides`` would get, with its ``hydra`` block and ``${hydra:...}`` resolvable
    (the run folder is ``hydra.run.dir``, as Hydra will make it)."""
    with _composing():
        cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    from hydra.core.hydra_config import HydraConfig

    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = os.path.abspath(str(cfg.hydra.run.dir))
    HydraConfig.instance().set_config(cfg)
    return cfg


def before_hydra(config_name: str, prog: str, precheck: Callable[[DictConfig], None] | None = None,
                 argv: list[str] | None = None) -> None:
    """Compose the run's config and run ``precheck`` on it before Hydra does anything; exit with one line
    when either refuses. Hydra's own modes (``-m``, ``--cfg``, ``--info`` ...) are left to Hydra."""
    args = sys.argv[1:] if argv is None else argv
    _state.update(run_dir_existed=True, first_new=None)
    if any(a.startswith("-") for a in args):
        return
    with command_guard(prog, config_name=config_name, overrides=args):
        cfg = compose_run_config(config_name, args)
        run_dir = Path(os.path.abspath(str(cfg.hydra.run.dir)))
        new = [p for p in (run_dir, *run_dir.parents) if not os.path.lexists(p)]
        _state.update(run_dir_existed=not new, first_new=new[-1] if new else None)
        if precheck is not None:
            precheck(cfg)  # first: its refusals name the options the user gave (output_dir=)
        check_target(run_dir, "hydra.run.dir")  # Hydra's own folder follows the output policy too
        check_writable(run_dir, _run_dir_key(cfg, run_dir))  # Hydra's own error there is a traceback


def _run_dir_key(cfg: DictConfig, run_dir: Path) -> str:
    """The option that named the run folder: ``output_dir`` where the command writes its outputs there."""
    try:
        same = "output_dir" in cfg and os.path.abspath(str(cfg.output_dir)) == str(run_dir)
    except OmegaConfBaseException:
        same = False
    return "output_dir" if same else "hydra.run.dir"


def plain(cfg: DictConfig) -> dict:
    """The command's keys of a composed config as plain, resolved data (its ``hydra`` block left out)."""
    return OmegaConf.to_container(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]), resolve=True)


def _remove_run_dir(run_dir: str | None) -> None:
    """Remove the run folder when this run made it and it holds no file but Hydra's own (``.hydra/``, its
    log), a logger's copy of the config (``hparams.yaml``) and empty folders, all made before it failed."""
    if not run_dir or _state["run_dir_existed"] or not os.path.isdir(run_dir):
        return
    for folder, subfolders, names in os.walk(run_dir):
        top = os.path.samefile(folder, run_dir)
        if top:
            subfolders[:] = [d for d in subfolders if d not in HYDRA_FILES]
        if any(not (top and n.endswith(".log")) and n != "hparams.yaml" for n in names):
            return  # something of the run's own: a checkpoint, metrics
    shutil.rmtree(run_dir, ignore_errors=True)
    remove_new_parents(run_dir)


def remove_new_parents(run_dir: str | os.PathLike) -> None:
    """Remove the empty folders above ``run_dir`` that Hydra made for it (outputs/train/<date>)."""
    first_new = _state["first_new"]
    if first_new is None:
        return
    for parent in Path(os.path.abspath(run_dir)).parents:
        if parent != first_new and first_new not in parent.parents:
            return
        try:
            os.rmdir(parent)
        except OSError:
            return  # not empty: another run's, or files of its own
        if parent == first_new:
            return


def _given(overrides: list[str] | None) -> list[str]:
    """``overrides``, or inside Hydra's run the overrides it was given."""
    from hydra.core.hydra_config import HydraConfig

    if overrides is not None or not HydraConfig.initialized():
        return list(overrides or [])
    return list(HydraConfig.get().overrides.task)


def _run_dir() -> str | None:
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else None
    except (ValueError, OmegaConfBaseException):
        return None


@contextmanager
def command_guard(prog: str, overwrite: bool = False, config_name: str | None = None,
                  extra: tuple[type[BaseException], ...] = (), flag: str = "overwrite=true",
                  overrides: list[str] | None = None) -> Iterator[None]:
    """Run a command's work: its files may replace only its own (``overwrite``: any); every error ends as one
    line on stderr with exit status 1, and Ctrl-C as one line with status 130 (SystemExit passes through).
    The errors a user can fix say what to fix; any other says its kind, and `DEBUG_ENV`=1 shows its
    traceback instead. ``flag``: how the command's user says "overwrite" (``--overwrite``). ``overrides``: the
    command line composed here, whose choices (model=lstm) decide which keys a "did you mean" offers; inside
    Hydra's run, the run's own."""
    try:
        with command_run(overwrite, flag):
            yield
    except (ConfigCompositionException, MissingConfigException, ConfigAttributeError, ConfigKeyError) as err:
        fail(prog, key_message(err, config_name, _given(overrides)) if config_name else one_line(err))
    except (*USER_ERRORS, *extra) as err:
        fail(prog, one_line(err))
    except HydraException as err:
        fail(prog, one_line(err))
    except KeyboardInterrupt as err:
        interrupted(prog, err)
    except OSError as err:  # a write the system refused (a full disk, permissions): name the file
        if err.errno in FULL_DISK and err.filename:
            fail(prog, one_line(full_disk_error(err.filename, err)))
        if err.errno in FULL_DISK:  # a write() call's error names no file: guessing one named the wrong disk
            fail(prog, "a write failed: the disk is full; the files finished before it are kept; free some space "
                       "or choose another output folder")
        if err.filename is None:
            unexpected(prog, err)
        fail(prog, f"{err.filename}: {err.strerror or one_line(err)}")
    except Exception as err:  # noqa: BLE001 - the last line of defence: no traceback reaches the user
        unexpected(prog, err)


def debugging() -> bool:
    """Whether the user asked for tracebacks (`DEBUG_ENV`=1)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def unexpected(prog: str, err: BaseException) -> None:
    """An error no check foresaw: one line with its kind (its traceback with `DEBUG_ENV`=1)."""
    if debugging():
        raise err
    fail(prog, f"{one_line(err)} ({type(err).__name__}; {DEBUG_ENV}=1 shows where)")


def interrupted(prog: str, err: BaseException | None = None) -> None:
    """Ctrl-C: one line (what was kept, when the command says so) and exit status 130."""
    _remove_run_dir(_run_dir())
    print(f"{prog}: {str(err or '') or 'interrupted (Ctrl-C); nothing more was written'}", file=sys.stderr, flush=True)
    raise SystemExit(130)


def fail(prog: str, line: str) -> None:
    _remove_run_dir(_run_dir())
    print(f"{prog}: error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(1)
