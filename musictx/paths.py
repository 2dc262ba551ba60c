"""Where the project's Hydra configs live.

Entry points pass this absolute path to ``@hydra.main``: a relative ``config_path`` is read as a
Python module path when the script runs as an installed console script, and is then not found.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = str(REPO_ROOT / "conf")
