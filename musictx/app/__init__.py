"""``musictx-app``: a local web page (Gradio) that continues, fills in or accompanies a MIDI file.

    musictx-app                                   # http://127.0.0.1:7860; each upload gets the model that fits it
    musictx-app --model outputs/train/.../checkpoints/last.ckpt --port 8000   # one model for every request

Without ``--model`` each request gets the shipped model ``musictx-generate`` would choose (`musictx.app.models`):
pop for a song on a beat grid or with a band's tracks and for the Accompany tab, pop_infill for the Infill tab,
piano for a piano performance; each is loaded on first use, and the page says which one made each result.

Upload a MIDI file (or keep the bundled motif), choose how much of it to keep, how long to continue,
temperature, top-p, the number of samples and the random seed, and press Continue: each continuation
shows its piano roll (the seed shaded), plays in the page (WAV from `musictx.io.audio`) and downloads as
MIDI; "Continue this one further" takes a result as the next seed. Needs the ``app`` extra
(``pip install 'musictx[app]'``); binds 127.0.0.1 unless ``--host`` says otherwise.

- `musictx.app.models`: which model serves a request, loaded once.
- `musictx.app.core`: `Continuer`, the glue between a request and the generation library (`musictx.generation`)
  (no Gradio).
- `musictx.app.disk`: the one work folder (also Gradio's cache) and its limits; `musictx.app.messages`: upload
  problems in the app's words.
- `musictx.app.page`: the Gradio page (its queue bounded); `musictx.app.infill_page`: its Infill and Accompany
  tabs, whose requests are `musictx.app.infill_tab` (empty bar boxes: the whole piece).
- `musictx.app.boxes`: the page's sliders, whose number boxes keep what was typed: a value a slider cannot take is
  refused in the status line, naming the box and its range (Gradio set it back into range unsaid).
- `musictx.app.cli`: the console script (limits, host warning, login, SIGTERM).
"""
