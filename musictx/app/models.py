"""Which model serves an app request: the one ``--model`` pins, else the shipped model that
`musictx.generation.model_choice.choose_model` picks for the upload and the tab, the rule ``musictx-generate``
follows with ``checkpoint=null`` (a song on a beat grid or with a band's tracks, and the Accompany tab: pop;
the Infill tab: pop_infill; a piano performance: piano). Each model is loaded on its first use and kept, so
that one app serves every tab without a restart."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from musictx.app.messages import for_the_page
from musictx.checkpoints.model_store import ModelLoadError, load_model, shipped_models
from musictx.decoding import GenerateError
from musictx.generation import GenerateOptions, choose_model

TAB_NAMES = {"continue": "Continue", "infill": "Infill", "accompany": "Accompany"}


@dataclass(frozen=True)
class Loaded:
    """One loaded model: the network, its tokenizer and `musictx.checkpoints.model_store.load_model`'s meta."""

    net: object
    tokenizer: object
    meta: dict

    @property
    def ref(self) -> str:
        return self.meta["ref"]

    @property
    def has_attention(self) -> bool:
        return hasattr(self.net, "attention_probs")


@dataclass(frozen=True)
class Choice:
    """The model a request uses and why, as the page says it."""

    model: Loaded
    why: str

    def line(self) -> str:
        return f"Model `{self.model.ref}`: {self.why}."


class Models:
    """The app's models: ``pinned`` (``--model``; loaded at once, so that a bad one stops the app at its start)
    or, when None, each request's choice, loaded on first use. Thread-safe: a preview and a request may ask at
    the same time."""

    def __init__(self, pinned: str | None, base: GenerateOptions):
        self.pinned, self.base = pinned or None, base
        self._loaded: dict[str, Loaded] = {}
        self._lock = threading.Lock()
        if self.pinned:
            self.get(self.pinned)

    def get(self, ref: str) -> Loaded:
        """The model ``ref`` (a shipped name, a folder, a .ckpt), loaded once; GenerateError naming --model."""
        with self._lock:
            if ref not in self._loaded:
                try:
                    net, tokenizer, meta = load_model(ref, map_location=self.base.device)
                except ModelLoadError as err:  # the message starts with the reference
                    raise GenerateError(f"--model {err}") from None
                replace(self.base, checkpoint=ref).check_model(net, tokenizer)
                self._loaded[ref] = Loaded(net, tokenizer, meta)
            return self._loaded[ref]

    def choose(self, path: str | os.PathLike | None, task: str = "continue") -> Choice:
        """The model for ``path`` in the tab of ``task`` (continue, infill, accompany), and why."""
        if self.pinned:
            return Choice(self.get(self.pinned), "chosen with --model")
        try:  # the choice reads the file: a damaged one or one without notes is refused here first
            name, why = choose_model(path, shipped_models(), task)
        except GenerateError as err:  # said with the file's name, not its server path, and no CLI advice
            raise GenerateError(for_the_page(err, Path(path))) from None
        return Choice(self.get(name), why.replace(f"task={task}", f"the {TAB_NAMES[task]} tab"))

    def loaded(self) -> list[str]:
        with self._lock:
            return list(self._loaded)

    def startup_line(self) -> str:
        """What the app says about its models when it starts (and the page's header, in Markdown)."""
        if self.pinned:
            model = self.get(self.pinned)
            return f"model `{model.ref}` ({model.meta['source']}, pinned with --model)"
        return ("model chosen for each upload and tab, as musictx-generate does: `pop` for a song on a beat grid "
                "or with a band's tracks and for Accompany, `pop_infill` for Infill, `piano` for a performance "
                "(--model pins one)")
