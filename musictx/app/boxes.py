"""The page's sliders, whose number box now hands on what was typed: Gradio's slider set its box back into the
slider's range when the box lost focus (pressing Continue does that), so 500 typed as the seconds to add ran
as 60, -3 as 1, 9 samples as 4 and an emptied box as its minimum, and nothing said so; 2.5 samples reached
the handler and ran as 2. Here the box keeps what was typed (`KEEP_TYPED`, run by the page on load), the server
passes it on unchecked (`Box.slider`), and `Box.check` refuses it in the tab's status line, naming the box and
its range, as the app's other boxes do ("Seed starts at ...", the bar boxes)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from musictx.app.settings import MAX_LENGTH_SECONDS, MAX_SAMPLES, MAX_SEED_SECONDS
from musictx.decoding import GenerateError

TYPED = "musictx-typed"  # the class of the sliders whose number box keeps what was typed

# Gradio's slider clamps its number box in its own blur listener; a listener on the window in the capture phase
# runs first, and stopping the event there keeps it from the box's (the box keeps its value, the request carries
# it). Only the app's sliders are spared the clamp: they are the ones whose values the server checks.
KEEP_TYPED = f"""() => {{
  if (window.musictxKeepsTyped) return;
  window.musictxKeepsTyped = true;
  window.addEventListener("blur", (event) => {{
    const box = event.target;
    if (box instanceof HTMLInputElement && box.type === "number" && box.closest(".{TYPED}")) {{
      event.stopImmediatePropagation();
    }}
  }}, true);
}}"""


def _as_sent(payload):
    return payload


@dataclass(frozen=True)
class Box:
    """One slider of the page: ``name`` starts its label and names it in a refusal; ``whole``: a count, so
    that 2.5 is refused rather than rounded."""

    name: str
    minimum: float
    maximum: float
    step: float
    whole: bool = False

    def slider(self, value, more: str = "", **kwargs) -> gr.Slider:
        """The slider, labelled by the box's name and then ``more``, that hands its handler the value as sent, in
        range or not (None for an empty box), for `check`: Gradio's own check refused a value out of range with
        a toast that did not name the box, over the last request's message. (Set on the one slider: a subclass
        of a Gradio component makes Gradio write a .pyi file beside its module.)"""
        label = f"{self.name} {more}" if more else self.name
        slider = gr.Slider(self.minimum, self.maximum, value=value, step=self.step, label=label, elem_classes=[TYPED],
                           **kwargs)
        slider.preprocess = _as_sent
        return slider

    def check(self, value) -> float | int:
        """``value`` as the request uses it, or GenerateError naming the box and its range."""
        wanted = f"{'a whole number' if self.whole else 'a number'} from {self.minimum:g} to {self.maximum:g}"
        if value is None or (isinstance(value, str) and not value.strip()):
            raise GenerateError(f"{self.name} is empty: give {wanted}")
        try:
            number = float(value)
        except (TypeError, ValueError):  # an API caller's text
            raise GenerateError(f"{self.name} must be {wanted}, got {value!r}") from None
        if isinstance(value, bool) or not self.minimum <= number <= self.maximum or (
                self.whole and not number.is_integer()):
            raise GenerateError(f"{self.name} must be {wanted}, got {number:g}")
        return int(number) if self.whole else number


SEED_SECONDS = Box("Seed seconds", 1, MAX_SEED_SECONDS, 0.5)
LENGTH = Box("Seconds to add", 1, MAX_LENGTH_SECONDS, 1)
TEMPERATURE = Box("Temperature", 0, 1.5, 0.05)
TOP_P = Box("Top-p", 0.5, 1.0, 0.01)
SAMPLES = Box("Samples", 1, MAX_SAMPLES, 1, whole=True)
RECALL = Box("Come back to the seed", 0, 2, 0.1)
LAST_NOTES = Box("Last notes that ask", 1, 48, 1, whole=True)
