"""Where the project's Hydra configs live: ``musictx/conf`` inside the package (the top-level ``conf``
of a checkout is a link to it), so an installed musictx (``pip install .``) has them too.

Entry points pass this absolute path to ``@hydra.main``: a relative ``config_path`` is read as a
Python module path when the script runs as an installed console script, and is then not found.
"""

import functools
import os
from pathlib import Path

import yaml

# The installed package itself: what it ships (models, configs) is not a place for a user's outputs.
PACKAGE_DIR = Path(__file__).resolve().parent

CONF_DIR = str(PACKAGE_DIR / "conf")

# The seed motif shipped with the package, written for this project as a fixed, known seed: `make continue`,
# the web app's default seed and the realtime and app benches continue it.
BUNDLED_MOTIF = PACKAGE_DIR / "assets" / "motif.mid"

# The shipped model folders (config.json + model.safetensors + model card), read by the model store.
PRETRAINED_DIR = PACKAGE_DIR / "pretrained"


def installed_models_dir() -> Path:
    """Model folders installed beside the package, found by name like the shipped ones: ``$MUSICTX_MODELS``,
    else ``$XDG_DATA_HOME/musictx/models`` (``~/.local/share/musictx/models``). For models too large for
    the package (pop-large: 43 MB), which `scripts/import_pop_large.py` installs there."""
    if os.environ.get("MUSICTX_MODELS"):
        return Path(os.environ["MUSICTX_MODELS"]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "musictx" / "models"


@functools.cache
def _conf_text(name: str) -> str:
    return (PACKAGE_DIR / "conf" / f"{name}.yaml").read_text()  # read once per process


def conf_values(name: str, groups: tuple[str, ...] = (), **overrides) -> dict:
    """conf/<name>.yaml as plain data without its ``hydra`` block (a fresh copy each call), read without
    Hydra: the option names, and the one place their defaults are written. ``overrides`` replace keys, and
    a dict for one of ``groups`` (the YAML's nested blocks) is merged into that block."""
    values = yaml.safe_load(_conf_text(name))
    values.pop("hydra", None)
    # a Hydra defaults list's groups (``- tokenizer: performance``) become blocks, as Hydra composes them;
    # a string override picks another file of the group (``tokenizer="remi"``)
    for entry in values.pop("defaults", []):
        if isinstance(entry, dict) and not next(iter(entry)).startswith("override "):  # Hydra's own groups
            (group, choice), = entry.items()
            if group.split("@")[0] == "hooks":  # the hooks' options: a block without them samples with their
                continue                        # defaults, written in the hooks' own files (SamplingOptions)
            picked = overrides.get(group)
            choice = picked if isinstance(picked, str) else choice
            values[group] = yaml.safe_load(_conf_text(f"{group}/{choice}"))
            if isinstance(picked, str):
                overrides = {k: v for k, v in overrides.items() if k != group}
    for key, value in overrides.items():
        values[key] = {**values[key], **value} if key in groups and isinstance(value, dict) else value
    return values
