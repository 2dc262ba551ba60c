"""Loggers of musictx-train.

`CSVLogger` is Lightning's, except that a run into a folder that already holds ``metrics.csv`` keeps the
rows that came before it. Lightning deletes that file when the logger starts, so resuming a run in its
own folder (``ckpt_path=<run>/checkpoints/last.ckpt``) lost every step before the resume. Both of its files,
``metrics.csv`` and ``hparams.yaml``, are written whole or not at all (a temporary beside each, renamed over
it): Lightning wrote them in place, and a run killed during a write left ``hparams.yaml`` empty.
"""

from __future__ import annotations

import csv
import os

from lightning.pytorch.core.saving import save_hparams_to_yaml
from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from musictx.safe_output import atomic_path


def _step(row: dict) -> float | None:
    try:
        return float(row.get("step") or "")
    except ValueError:
        return None


class KeepingExperimentWriter(ExperimentWriter):
    """Lightning's CSV writer, keeping the earlier rows of ``metrics.csv``.

    At the first save, the earlier rows whose step is below the first new step are kept and the new rows
    follow them: a resumed run continues the file, and steps it does again (logged after the checkpoint
    it resumes from) are not listed twice. A run that starts from step 0 replaces the file, as before.
    The file is left untouched until then, so a run that fails before logging loses nothing.
    """

    def _check_log_dir_exists(self) -> None:  # Lightning's version deletes metrics.csv here
        self._earlier: tuple[list[str], list[dict]] | None = None
        if os.path.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
                self._earlier = (list(reader.fieldnames or []), rows)

    def log_hparams(self, params: dict) -> None:
        """Lightning's, with the file written under a temporary name and renamed."""
        self.hparams.update(params)
        path = os.path.join(self.log_dir, self.NAME_HPARAMS_FILE)
        with atomic_path(path, "hparams", replace=True) as tmp:
            save_hparams_to_yaml(tmp, self.hparams)

    def save(self) -> None:
        """Lightning's save appends to the file in place; here the whole file is written under a temporary
        name and renamed (`musictx.safe_output`), so a full disk or a kill leaves the previous rows whole."""
        if not self.metrics:
            return
        if self._earlier is not None:
            first = min(float(m["step"]) for m in self.metrics)
            self._keep_earlier(first)
        self._record_new_keys()
        rows = []
        if os.path.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="") as f:
                rows = list(csv.DictReader(f))
        self.metrics_keys = sorted(set(self.metrics_keys).union(*rows))  # columns of the file, and new ones
        with atomic_path(self.metrics_file_path, "metrics", replace=True) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.metrics_keys)
            writer.writeheader()
            writer.writerows(rows + self.metrics)
        self.metrics = []

    def _keep_earlier(self, first_step: float) -> None:
        header, rows = self._earlier
        self._earlier = None
        kept = [r for r in rows if (s := _step(r)) is not None and s < first_step]
        if not kept:
            os.remove(self.metrics_file_path)
            return
        with atomic_path(self.metrics_file_path, "metrics", replace=True) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(kept)
        self.metrics_keys = sorted(header)  # new columns are added by Lightning's header rewrite


class CSVLogger(LightningCSVLogger):
    """``lightning.pytorch.loggers.CSVLogger`` whose ``metrics.csv`` survives a resume in the same folder
    (see `KeepingExperimentWriter`). Same arguments."""

    @property
    @rank_zero_experiment
    def experiment(self) -> KeepingExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = KeepingExperimentWriter(log_dir=self.log_dir)
        return self._experiment
