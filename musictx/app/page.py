"""The Gradio page of ``musictx-app``: seed and settings on the left, up to `MAX_SAMPLES` results on the right,
each with its piano roll, a player, a MIDI download and "Continue this one further".

API names (for ``gradio_client``): ``/continue_seed`` (the seed file, the six settings, then optionally where
in the file the seed starts, in seconds),
``/continue_further_<i>`` (the last seed seconds of result *i* as the seed; the five settings after seed seconds,
then optionally the seed seconds), ``/preview_seed`` (the seed file's piano roll, shown when a file is chosen),
``/use_motif`` and ``/draw_arcs`` (result number from 1, layer, head, last notes; a Transformer's attention arcs,
`musictx.evaluation.arcs`). The Infill and Accompany tabs and their API names: `musictx.app.infill_page`.
Every result of the session stays downloadable in the "Takes" list, newest first, while the server keeps it
(`musictx.app.disk.Limits`: the oldest results are removed first).

Requests that generate run one at a time, first come first served; at most ``max_queue`` events wait (Gradio
shows each its place in the line), and one more is refused at once: the page says "This application is
currently busy. Please try again.", an API client gets HTTP 503 (gradio_client: ``QueueError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from musictx.app.boxes import KEEP_TYPED, LAST_NOTES, LENGTH, RECALL, SAMPLES, SEED_SECONDS, TEMPERATURE, TOP_P
from musictx.app.core import (
    DEFAULT_MAX_QUEUE,
    MAX_SAMPLES,
    Continuer,
    Result,
    Settings,
    draw_request,
    preview_request,
    run_request,
)
from musictx.app.infill_page import infill_tabs
from musictx.app.settings import DRUMS_BOX, SEED_HINT, seed_or_fresh, with_line
from musictx.decoding import GenerateError
from musictx.evaluation.arcs import ArcChoice


@dataclass
class Slot:
    """The components that show one result."""

    box: gr.Group
    title: gr.Markdown
    image: gr.Image
    audio: gr.Audio
    midi: gr.DownloadButton
    further: gr.Button

    @property
    def outputs(self) -> list:
        return [self.box, self.title, self.image, self.audio, self.midi]

    @staticmethod
    def values(result: Result | None) -> list:
        if result is None:
            return [gr.update(visible=False), "", None, None, gr.update(value=None)]
        wav = str(result.wav) if result.wav else None
        return [gr.update(visible=True), f"**{result.title}**", str(result.png), wav,
                gr.update(value=str(result.midi), label=f"Download {result.midi.name}")]


def _slot(index: int) -> Slot:
    with gr.Group(visible=False, elem_id=f"result-{index}") as box:
        title = gr.Markdown()
        image = gr.Image(type="filepath", interactive=False, show_label=False, elem_id=f"roll-{index}")
        audio = gr.Audio(type="filepath", interactive=False, label="Listen", elem_id=f"audio-{index}")
        with gr.Row():
            midi = gr.DownloadButton("Download MIDI", elem_id=f"midi-{index}")
            further = gr.Button("Continue this one further", elem_id=f"further-{index}")
    return Slot(box, title, image, audio, midi, further)


def _header(cont: Continuer, max_queue: int) -> str:
    audio = "on" if cont.audio_reason is None else f"off ({cont.audio_reason})"
    models = cont.models.startup_line()
    return (f"# musictx: continue, fill in or accompany a MIDI file\n"
            f"{models[0].upper()}{models[1:]}; each result says which. Audio: {audio}. Upload a `.mid` file of at most "
            f"{cont.max_upload_mb:g} MB or keep the bundled motif; the shaded part of each piano roll is the seed.\n\n"
            f"{cont.limits.line()} {_queue_line(max_queue)}")


def _queue_line(max_queue: int) -> str:
    return (f"One request runs at a time and at most {max_queue} wait, first come first served (the page shows "
            "your place); when the line is full the page says the server is busy.")


def _controls() -> list:
    """Seed seconds, seconds to add, temperature, top-p, samples, random seed, seed start, recall guidance, notes
    per bar, instruments, drums, ending (the order of `Settings`, whose defaults they start at; the seed start is shown
    second but passed after the others, and the later ones last, so that API calls without them still work)."""
    start = Settings()
    seed_seconds = SEED_SECONDS.slider(start.seed_seconds, "(kept from the seed's first note; "
                                       "Continue further keeps a result's last seconds)")
    # no minimum: Gradio's refusal of -3 was a toast that did not name the box, over the last request's status;
    # `Settings.check` refuses it in the status line, naming the box
    seed_from = gr.Number(value=start.seed_from, label="Seed starts at (seconds into the file)")
    return [
        seed_seconds,
        LENGTH.slider(start.length_seconds),
        TEMPERATURE.slider(start.temperature, "(0 = always the likeliest event)"),
        TOP_P.slider(start.top_p),
        SAMPLES.slider(start.num_samples),
        # no precision: Gradio's precision=0 rounded 2.5 to 2 unsaid; `Settings.check` refuses it, naming the box.
        # The hint is `info`, not the label: the label names the API's parameter (gradio_client's ``random_seed``)
        gr.Number(value=start.seed, label="Random seed", info=SEED_HINT, elem_id="random-seed"),
        seed_from,
        RECALL.slider(start.recall_guidance, "(recall guidance; 0 = the model alone)"),
        gr.Textbox(value=start.density, label="Notes per bar, by track (pop; empty: the model's own)",
                   placeholder="PIANO=8, MELODY=4"),
        gr.Textbox(value=start.instruments, label="Instruments, by track (General MIDI; empty: as the file has them)",
                   placeholder="MELODY=Flute, BRIDGE=40, PIANO=0"),
        gr.Checkbox(value=start.drums == "loop", label=f"{DRUMS_BOX} (a band's: its groove under the new bars; "
                    "untick: they stop where the seed does)"),
        gr.Checkbox(value=start.ending, label="End the piece (on the key's chord, held: pop's last two bars a "
                    "cadence, the piano's last seconds)"),
    ]


def _respond(results: list[Result] | None, message: str, n_outputs: int, takes: list[str],
             seed_file=None) -> list:
    """Values for [status, shown, seed_file, *slots, takes, history]; after an error only the status changes."""
    if results is None:
        return [message] + [gr.skip()] * (n_outputs - 1)
    values = [message, [str(r.midi) for r in results], gr.skip() if seed_file is None else seed_file]
    for i in range(MAX_SAMPLES):
        values += Slot.values(results[i] if i < len(results) else None)
    # the server removes its oldest results (`musictx.app.disk`): the list shows those it still has
    takes = [str(r.midi) for r in reversed(results)] + [t for t in takes or [] if Path(t).is_file()]
    return values + [takes, gr.update(value=takes, visible=True)]


def _results_column():
    """The right column: the result slots and the session's takes."""
    with gr.Column(scale=2):
        slots = [_slot(i) for i in range(MAX_SAMPLES)]
        history = gr.File(label="Takes this session (newest first, while the server keeps them)",
                          file_count="multiple", interactive=False, visible=False, elem_id="takes")
    return slots, history


def _seed_column(cont: Continuer):
    """The left column: the seed file, its piano roll, the settings, the Continue button and under it the status
    line (its progress and messages show where the button was pressed, not a screen away)."""
    with gr.Column(scale=1, min_width=320):
        seed_file = gr.File(value=str(cont.motif), label="Seed MIDI", file_types=[".mid", ".midi"],
                            elem_id="seed-file")
        use_motif = gr.Button("Use the bundled motif", size="sm")
        preview = gr.Image(value=str(cont.motif_preview()), type="filepath", interactive=False,
                           label="The seed file", elem_id="seed-roll")
        preview_note = gr.Markdown(elem_id="seed-roll-note")
        controls = _controls()
        go = gr.Button("Continue", variant="primary", elem_id="continue")
        status = gr.Markdown("Pick a seed and press **Continue**.", elem_id="status", min_height=60)
    return seed_file, use_motif, preview, preview_note, controls, go, status


def quiet_bounds() -> None:
    """A value outside a slider's or number box's range (sent through the API) is refused by Gradio with a
    clean message on the page, but Gradio also printed its traceback in the server's log: make that refusal
    an expected one (``print_exception=False``), as the app's own refusals are."""
    number = gr.components.Number
    if getattr(number.raise_if_out_of_bounds, "musictx_quiet", False):
        return
    loud = number.raise_if_out_of_bounds

    def raise_quietly(num, minimum, maximum) -> None:
        try:
            loud(num, minimum, maximum)
        except gr.Error as err:
            raise gr.Error(err.message, print_exception=False) from None

    raise_quietly.musictx_quiet = True
    number.raise_if_out_of_bounds = staticmethod(raise_quietly)


def build_page(cont: Continuer, max_queue: int = DEFAULT_MAX_QUEUE) -> gr.Blocks:
    """The page around ``cont``, its queue bounded to ``max_queue`` waiting events (not launched)."""
    quiet_bounds()
    if max_queue < 1:
        raise ValueError(f"max_queue must be >= 1, got {max_queue}")
    with gr.Blocks(title="musictx") as page:
        gr.Markdown(_header(cont, max_queue))
        shown = gr.State([])  # MIDI paths of the results on the page, in slot order
        takes = gr.State([])  # MIDI paths of every result of this session, newest first
        with gr.Tab("Continue", elem_id="tab-continue"):
            with gr.Row():
                seed_file, use_motif, preview, preview_note, controls, go, status = _seed_column(cont)
                slots, history = _results_column()
            arcs = _arcs_panel(cont, shown)
        on_load = infill_tabs(cont, seed_file, takes, history)
        outputs = [status, shown, seed_file] + [c for s in slots for c in s.outputs] + [takes, history]
        _wire_continue(cont, outputs, go, slots, controls, takes, shown, seed_file, status)
        seed_file.change(lambda path: _preview(cont, path), inputs=seed_file, outputs=[preview, preview_note],
                         api_name="preview_seed", concurrency_id="preview")
        # instant, so it need not wait in (or take a place in) the bounded queue
        use_motif.click(lambda: str(cont.motif), outputs=seed_file, api_name="use_motif", queue=False)
        if arcs is not None:
            arcs.clear_on(go)
        on_load(page)
        page.load(None, js=KEEP_TYPED)  # the sliders' number boxes keep what was typed (`musictx.app.boxes`)
    return page.queue(default_concurrency_limit=1, max_size=max_queue)


def _wire_continue(cont: Continuer, outputs: list, go, slots, controls, takes, shown, seed_file, status) -> None:
    """The Continue tab's buttons: Continue on the seed, and each result's Continue further, all in one
    queue (``concurrency_id="generate"``), each answering into ``outputs``."""
    # Gradio hands a handler its progress bar through a `gr.Progress()` default (hence the noqa B008).
    def on_continue(done, seed_midi, seed_seconds, length_seconds, temperature, top_p, num_samples,
                    random_seed, seed_from=0, recall=None, density="", instruments="", drums=True, ending=False,
                    progress=gr.Progress()):  # noqa: B008
        # the settings are read inside the request: a box's refusal is its status line
        seed, drawn = seed_or_fresh(random_seed)
        results, message = run_request(lambda: cont.continue_file(seed_midi, _settings(
            seed_seconds, length_seconds, temperature, top_p, num_samples, seed, seed_from, recall, density,
            instruments, drums, ending), _reporter(progress)))
        return _respond(results, with_line(message, drawn if results else ""), len(outputs), done)

    def further(index: int):
        def on_further(done, paths, length_seconds, temperature, top_p, num_samples, random_seed,
                       seed_seconds=None, recall=None, density="", instruments="", drums=True, ending=False,
                       progress=gr.Progress()):  # noqa: B008
            if index >= len(paths):
                return _respond(None, "**Cannot continue:** that result is no longer on the page.", len(outputs),
                                done)
            seed, drawn = seed_or_fresh(random_seed)
            results, message = run_request(lambda: cont.continue_further(paths[index], _settings(
                seed_seconds, length_seconds, temperature, top_p, num_samples, seed, recall=recall,
                density=density, instruments=instruments, drums=drums, ending=ending), _reporter(progress)))
            return _respond(results, with_line(message, drawn if results else ""), len(outputs), done,
                            seed_file=paths[index])
        return on_further

    common = dict(outputs=outputs, concurrency_id="generate", concurrency_limit=1)
    go.click(on_continue, inputs=[takes, seed_file, *controls], api_name="continue_seed",
             show_progress_on=[status], **common)
    for i, slot in enumerate(slots):  # the progress shows in the result whose button was pressed
        slot.further.click(further(i), inputs=[takes, shown, *controls[1:6], controls[0], *controls[7:]],
                           api_name=f"continue_further_{i}", show_progress_on=[slot.title], **common)


@dataclass
class ArcsPanel:
    image: gr.Image
    message: gr.Markdown

    def clear_on(self, button: gr.Button) -> None:
        """A new continuation makes the arcs of the old one stale."""
        button.click(lambda: (None, ""), outputs=[self.image, self.message], queue=False)


def _view(value: str) -> int | None:
    return None if value == "mean" else int(value)


def _arcs_panel(cont: Continuer, shown: gr.State) -> ArcsPanel | None:
    """Attention arcs of a result (Transformers only): which earlier notes each of its last notes attends to."""
    model = cont.first_model()  # the shipped models share their shape; another result's refusal is one line
    if not model.has_attention:
        return None
    n_layers, n_heads = len(model.net.blocks), model.net.blocks[0].attn.n_heads
    with gr.Accordion("Where the model looks: attention arcs", open=False, elem_id="arcs"):
        with gr.Row():
            which = gr.Dropdown([str(i + 1) for i in range(MAX_SAMPLES)], value="1", label="Result")
            layer = gr.Dropdown(["mean", *map(str, range(n_layers))], value="mean", label="Layer")
            head = gr.Dropdown(["mean", *map(str, range(n_heads))], value="mean", label="Head")
            last = LAST_NOTES.slider(12)
        draw = gr.Button("Draw arcs", elem_id="draw-arcs")
        message = gr.Markdown(elem_id="arcs-message")
        image = gr.Image(type="filepath", interactive=False, show_label=False, elem_id="arcs-image")

    def on_draw(paths, which, layer, head, last):
        index = int(which) - 1
        try:
            last = LAST_NOTES.check(last)
        except GenerateError as err:
            return None, f"**Cannot draw:** {err}"
        if index >= len(paths):
            return None, "**Cannot draw:** there is no such result on the page yet; press Continue first."
        takeover = cont.takeovers.get(paths[index])
        choice = ArcChoice(layer=_view(layer), head=_view(head), last_notes=last)
        png, text = draw_request(lambda: cont.draw_arcs(paths[index], choice, takeover))
        return (None if png is None else str(png)), text

    draw.click(on_draw, inputs=[shown, which, layer, head, last], outputs=[image, message], api_name="draw_arcs",
               concurrency_id="generate", concurrency_limit=1)
    return ArcsPanel(image, message)


def _settings(seed_seconds, length_seconds, temperature, top_p, num_samples, random_seed, seed_from=0,
              recall=None, density="", instruments="", drums=True, ending=False) -> Settings:
    """The page's values as `Settings`, each slider's checked against its range (`musictx.app.boxes`: a
    GenerateError naming the box; Gradio hands a handler every input, so None is an emptied box, API callers'
    left-out values come filled with the page's). A cleared Seed starts at box sends None (the file's start); the
    random seed (an emptied box already drawn afresh: `seed_or_fresh`) goes on as sent, for `Settings.check` to
    refuse 2.5 rather than round it."""
    return Settings(SEED_SECONDS.check(seed_seconds), LENGTH.check(length_seconds), TEMPERATURE.check(temperature),
                    TOP_P.check(top_p), SAMPLES.check(num_samples), random_seed,
                    float(seed_from or 0), RECALL.check(recall), density or "", instruments or "",
                    "seed" if drums is False else "loop", bool(ending))


def _preview(cont: Continuer, path) -> tuple[str | None, str]:
    """(piano roll of the seed file, a line under it); a cleared box clears both, a bad file says why."""
    if not path:
        return None, ""
    made, message = preview_request(lambda: cont.preview_with_model(path))
    if made is None:
        return None, message
    png, choice = made
    return str(png), f"{Path(path).name}, as the model `{choice.model.ref}` reads it ({choice.why})."


def _reporter(progress: gr.Progress):
    return lambda fraction, text: progress(fraction, desc=text)
