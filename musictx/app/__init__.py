"""``musictx-app``: a local web page (Gradio) that continues a MIDI file with a musictx model.

    musictx-app                                   # the shipped "piano" model, http://127.0.0.1:7860
    musictx-app --model outputs/train/.../checkpoints/last.ckpt --port 8000

Upload a MIDI file (or keep the bundled motif), choose how much of it to keep, how long to continue,
temperature, top-p, the number of samples and the random seed, and press Continue: each continuation
shows its piano roll (the seed shaded), plays in the page (WAV from `musictx.io.audio`) and downloads as
MIDI; "Continue this one further" takes a result as the next seed. Needs the ``app`` extra
(``pip install 'musictx[app]'``); binds 127.0.0.1 unless ``--host`` says otherwise.

- `musictx.app.core`: `Continuer`, the glue between a request and the generation library (`musictx.generation`)
  (no Gradio).
- `musictx.app.disk`: the one work folder (also Gradio's cache) and its limits; `musictx.app.messages`: upload
  problems in the app's words.
- `musictx.app.page`: the Gradio page (its queue bounded); `musictx.app.infill_page`: its Infill and Accompany
  tabs, whose requests are `musictx.app.infill_tab` (infill: a model with the infill tokens, `--model pop_infill`).
- `musictx.app.cli`: the console script (limits, host warning, login, SIGTERM).
"""
