"""Where the project's Hydra configs live: ``musictx/conf`` inside the package (the top-level ``conf``
of a checkout is a link to it), so an installed musictx (``pip install .``) has them too.

Entry points pass this absolute path to ``@hydra.main``: a relative ``config_path`` is read as a
Python module path when the script runs as an installed console script, and is then not found.
"""

from pathlib import Path

# The installed package itself: what it ships (models, configs) is not a place for a user's outputs.
PACKAGE_DIR = Path(__file__).resolve().parent

CONF_DIR = str(PACKAGE_DIR / "conf")

# The seed motif shipped with the package (written by scripts/make_motif.py): the README's first command,
# the web app's default seed and the realtime and app benches continue it.
BUNDLED_MOTIF = PACKAGE_DIR / "assets" / "motif.mid"

# The shipped model folders (config.json + model.safetensors + model card), read by the model store.
PRETRAINED_DIR = PACKAGE_DIR / "pretrained"
