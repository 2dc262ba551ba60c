"""The page's "Infill" and "Accompany" tabs (`musictx.app.infill_tab` does the work): a song, a bar range shown
shaded on its piano roll, then Fill (or Write), Retry (the next random seed) and Keep (the take joins the
session's Takes list). The bar boxes take a number or its text; empty (or None) reaches the piece's edge.
API names: ``/infill_bars`` (song, first bar, last bar, tracks, may repeat the song's bars (bool), random seed,
beats per bar), ``/accompany_melody`` (melody, tracks to write, first bar, last bar, chord file or None, random
seed, beats per bar),
``/retry_infill``, ``/retry_accompany`` (the same inputs; the seed is one more), ``/keep_infill``,
``/keep_accompany`` and ``/infill_band`` (song, first, last: the shaded roll)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from musictx.app.core import Continuer
from musictx.app.infill_tab import Filler, as_paths
from musictx.app.messages import task_request
from musictx.app.settings import SEED_HINT, seed_or_fresh, with_line
from musictx.decoding import check_seed

SEED_BOX = "Random seed (seed)"  # as the Continue tab names it


@dataclass
class TakeView:
    """What shows one take: its line, piano roll, player, download, and the take's MIDI path (for Keep)."""

    title: gr.Markdown
    image: gr.Image
    audio: gr.Audio
    midi: gr.DownloadButton
    current: gr.State

    @property
    def outputs(self) -> list:
        return [self.title, self.image, self.audio, self.midi, self.current]


def _take_view(prefix: str) -> TakeView:
    title = gr.Markdown(elem_id=f"{prefix}-title")
    image = gr.Image(type="filepath", interactive=False, show_label=False, elem_id=f"{prefix}-roll")
    audio = gr.Audio(type="filepath", interactive=False, label="Listen", elem_id=f"{prefix}-audio")
    midi = gr.DownloadButton("Download MIDI", elem_id=f"{prefix}-midi")
    return TakeView(title, image, audio, midi, gr.State(None))


def _shown(result, message: str, seed) -> list:
    """Values for [status, seed box, *TakeView.outputs]; after an error only the status changes."""
    if result is None:
        return [message] + [gr.skip()] * 6
    wav = str(result.wav) if result.wav else None
    return [message, seed, f"**{result.title}**", str(result.png), wav,
            gr.update(value=str(result.midi), label=f"Download {result.midi.name}"), str(result.midi)]


def _keep(current, takes) -> tuple:
    """(status, takes, the Takes list): the take on show joins the session's takes, newest first."""
    if not current:
        return "**Cannot keep:** nothing to keep yet.", gr.skip(), gr.skip()
    takes = [current] + [t for t in as_paths(takes) if t != current]
    return f"Kept {current.rsplit('/', 1)[-1]}: it is in the Takes list of the Continue tab.", takes, \
        gr.update(value=takes, visible=True)


def _bar_boxes(prefix: str, first: int | None, last: int | None):
    """From and To, as text boxes: None starts one empty, showing its placeholder, and an empty box is the
    piece's edge (`musictx.app.infill_tab.bar_number`). Gradio's number box shows an empty value as 0 and its
    minimum of 1 then refuses the request before it runs: a user met "Value 0 is less than minimum value 1"."""
    def box(value, label, placeholder, end):
        return gr.Textbox(value="" if value is None else str(value), label=label, placeholder=placeholder,
                          max_lines=1, elem_id=f"{prefix}-{end}")
    with gr.Row():
        return (box(first, "From bar", "empty: the first bar", "from"),
                box(last, "To bar (inclusive)", "empty: the last bar", "to"))


def _wire(kind: str, filler: Filler, inputs: list, view: TakeView, status, seed, takes, history, buttons):
    """Fill / Retry / Keep of one tab; ``inputs`` end with the random seed box, then the beats per bar box (last,
    so that an API call made before it was added still works)."""
    go, retry, keep = buttons
    task, verb = {"infill": (filler.fill, "fill"), "accompany": (filler.accompany, "accompany")}[kind]

    # both tabs take five values, then the random seed and the beats per bar (None: an API call made before that
    # box); Gradio hands a handler its progress bar through a `gr.Progress()` default (hence the noqa B008)
    def run(a, b, c, d, e, number, beats=None, progress=gr.Progress()):  # noqa: B008
        return _run(a, b, c, d, e, number, beats, progress, 0)

    def again(a, b, c, d, e, number, beats=None, progress=gr.Progress()):  # noqa: B008
        return _run(a, b, c, d, e, number, beats, progress, 1)

    def _run(a, b, c, d, e, number, beats, progress, step: int):
        """The take of seed ``number`` + ``step``: the seed box is checked as typed (2.5 is refused, naming
        the box; Gradio's precision=0 rounded it unsaid), inside the request so that its refusal is the status.
        An empty box draws a fresh seed at each press, Retry's too, and stays empty; the status says the seed."""
        used = []
        number, drawn = seed_or_fresh(number)

        def work():
            used.append(check_seed(SEED_BOX, number) + (0 if drawn else step))
            return task(a, b, c, d, e, beats=beats, seed=used[0], report=_reporter(progress))
        result, message = task_request(work, verb)
        box = gr.skip() if drawn else (used[0] if used else None)
        return _shown(result, with_line(message, drawn if result is not None else ""), box)

    outputs = [status, seed, *view.outputs]  # the status sits under the buttons: the progress shows there
    common = dict(outputs=outputs, show_progress_on=[status], concurrency_id="generate", concurrency_limit=1)
    go.click(run, inputs=inputs, api_name=f"{kind}_{'bars' if kind == 'infill' else 'melody'}", **common)
    retry.click(again, inputs=inputs, api_name=f"retry_{kind}", **common)
    keep.click(_keep, inputs=[view.current, takes], outputs=[status, takes, history], api_name=f"keep_{kind}",
               queue=False)


def _reporter(progress: gr.Progress):
    """The bars drawn so far on the page's progress bar, under the pressed button."""
    return lambda fraction, text: progress(fraction, desc=text)


def _buttons(prefix: str, label: str):
    with gr.Row():
        return (gr.Button(label, variant="primary", elem_id=f"{prefix}-go"),
                gr.Button("Retry (next random seed)", elem_id=f"{prefix}-retry"),
                gr.Button("Keep", elem_id=f"{prefix}-keep"))


def _band(filler: Filler, path, first, last, beats=None):
    """(the song's roll with the range shaded, a line): shown as the song, the range or the meter changes."""
    if not path:
        return None, ""
    png, message = task_request(lambda: filler.band(path, first, last, beats), "show the bars")
    return (None, message) if png is None else (str(png), "The shaded bars are the ones to write.")


def infill_tabs(cont: Continuer, seed_file, takes: gr.State, history: gr.File) -> Callable[[gr.Blocks], None]:
    """The two tabs, each opening on the bundled motif so that its first click works (the Continue tab's does);
    each says in one line when a model pinned with --model cannot do its task. Returns what the page calls on
    itself: its load draws the Infill tab's roll of the motif (drawing needs the model, loaded on first use)."""
    filler = Filler(cont)
    with gr.Tab("Infill", elem_id="tab-infill"):
        song, first, last, tracks, repeats, beats, seed, roll, note, status, view, buttons = _infill_column(
            filler, seed_file)
        _wire("infill", filler, [song, first, last, tracks, repeats, seed, beats], view, status, seed, takes,
              history, buttons)

        def band(p, a, b, m):
            return _band(filler, p, a, b, m)
        for box in (song, first, last, beats):
            box.change(band, inputs=[song, first, last, beats], outputs=[roll, note],
                       api_name="infill_band" if box is song else False, concurrency_id="preview")
    with gr.Tab("Accompany", elem_id="tab-accompany"):
        melody, roles, a_first, a_last, chords, a_beats, a_seed, a_status, a_view, a_buttons = _accompany_column(
            filler)
        _wire("accompany", filler, [melody, roles, a_first, a_last, chords, a_seed, a_beats], a_view, a_status,
              a_seed, takes, history, a_buttons)

    def on_load(page: gr.Blocks) -> None:
        if filler.problem is None:
            page.load(band, inputs=[song, first, last, beats], outputs=[roll, note], api_name=False,
                      concurrency_id="preview")
    return on_load


def _infill_column(filler: Filler, seed_file):
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            song = gr.File(value=str(filler.cont.motif), label="Song MIDI", file_types=[".mid", ".midi"],
                           elem_id="infill-song")
            use_seed = gr.Button("Use the Continue tab's seed", size="sm")
            first, last = _bar_boxes("infill", 5, 8)
            tracks = gr.Textbox(label="Tracks to rewrite (names, comma-separated; empty: every track)")
            repeats = gr.Checkbox(value=True, label="Let the bars repeat the song's own bars (the copy cache; "
                                                    "off: new material on every retry)", elem_id="infill-repeats")
            beats = _beats_box("infill")
            seed = _seed_box("infill")
            buttons = _buttons("infill", "Fill")
            status = gr.Markdown(filler.problem or "The bundled motif is loaded: press **Fill** to write its bars "
                                 "5-8 anew, or upload a song and pick a bar range (empty bar boxes: from the first "
                                 "bar, or to the last).", elem_id="infill-status", min_height=60)
        with gr.Column(scale=2):
            roll = gr.Image(type="filepath", interactive=False, label="The song", elem_id="infill-band")
            note = gr.Markdown()
            view = _take_view("infill")
    use_seed.click(lambda path: path, inputs=seed_file, outputs=song, queue=False)
    return song, first, last, tracks, repeats, beats, seed, roll, note, status, view, buttons


def _accompany_column(filler: Filler):
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            melody = gr.File(value=str(filler.cont.motif), label="Melody MIDI (one or two tracks)",
                             file_types=[".mid", ".midi"], elem_id="accompany-melody")
            roles = gr.CheckboxGroup(["BRIDGE", "PIANO"], value=[], label="Tracks to write (none ticked: those "
                                     "the file lacks)")
            first, last = _bar_boxes("accompany", None, None)
            chords = gr.File(label="Chords (optional): a lab file of 'START END LABEL' lines, e.g. 0.0 2.4 G:min7",
                             file_types=[".lab", ".txt"], elem_id="accompany-chords")
            beats = _beats_box("accompany")
            seed = _seed_box("accompany")
            buttons = _buttons("accompany", "Write")
            status = gr.Markdown(filler.accompany_problem or "The bundled motif is loaded as the melody: press "
                                 "**Write**, or upload a melody (empty bar boxes: the whole piece).",
                                 elem_id="accompany-status", min_height=60)
        with gr.Column(scale=2):
            view = _take_view("accompany")
    return melody, roles, first, last, chords, beats, seed, status, view, buttons


def _seed_box(prefix: str):
    """The random seed, without Gradio's precision=0 (which rounded 2.5 to 2 unsaid): `_wire` checks it."""
    return gr.Number(value=0, label="Random seed", info=SEED_HINT, elem_id=f"{prefix}-seed")


def _beats_box(prefix: str):
    """Beats per bar, for a file whose meter is wrong (POP909's say one beat a bar): empty takes the file's beat
    file or meter, or finds the bars from the music when the meter says one beat a bar."""
    return gr.Textbox(value="", label="Beats per bar (empty: the file's meter, found from its music when it "
                      "says one beat a bar)", placeholder="e.g. 4", max_lines=1, elem_id=f"{prefix}-beats")
