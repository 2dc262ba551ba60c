"""A local HTTP API beside the page, for scripts and DAWs: post a MIDI file and settings, get a MIDI file back.

    curl -sf -F file=@song.mid -F seconds=20 http://127.0.0.1:7860/api/continue -o continued.mid
    curl -sf -F file=@song.mid -F first=9 -F last=12 http://127.0.0.1:7860/api/infill -o filled.mid
    curl -sf -F file=@melody.mid http://127.0.0.1:7860/api/accompany -o accompanied.mid
    curl -s http://127.0.0.1:7860/api/health

Each call does what the page's tab does, through the same `Continuer` and `Filler`: the model is chosen per
upload and task (``--model`` pins one), the same size limit, the same disk allowance (the app's upload guard
weighs every request first), and the same queue: one request works at a time, ``--max-queue`` may wait, one
more is answered 503 at once. A refusal is status 400 (413 for a file too large, 404 for no such endpoint, 405 for
another method than the endpoint's, 503 when busy) with one line of text, ``error: <what>``; the response's
``X-Musictx-Model`` header names the model that wrote it, and ``X-Musictx-Said`` what it wrote (the bars, and where
an empty To box stopped short of the piece's end).
It binds where the page binds: loopback unless ``--host`` says otherwise.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import uuid
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from musictx.app.core import USER_ERRORS, Continuer, Settings, too_large
from musictx.app.infill_tab import Filler
from musictx.decoding import GenerateError
from musictx.generation import seed_at_end

log = logging.getLogger("musictx.app")


def _flag(text: str) -> bool:
    """A form field's true or false (true, 1, yes, on / false, 0, no, off); ValueError else."""
    said = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
    if text.lower() not in said:
        raise ValueError(text)
    return said[text.lower()]


_flag.__name__ = "true or false"  # the refusal says "ending=maybe: not a true or false"


def _seconds_or_end(text: str) -> float | str:
    """``seed_from``: seconds, or ``end`` (the file's last seed_seconds, as ``musictx-generate`` takes it)."""
    return "end" if text.lower() == "end" else float(text)


_seconds_or_end.__name__ = "number of seconds or end"
FIELDS = {  # each endpoint's form fields besides ``file``, and how each is read
    "continue": {"seconds": float, "seed_seconds": float, "seed_from": _seconds_or_end, "seed": int,
                 "temperature": float,
                 "top_p": float, "density": str, "instruments": str, "drums": str,
                 "ending": _flag},
    "infill": {"first": str, "last": str, "tracks": str, "beats": str, "seed": int},
    "accompany": {"first": str, "last": str, "tracks": str, "beats": str, "seed": int},
}


# The page's boxes and the command's options that a shared refusal names, as the API's form fields name them: a caller
# who sent ``first=3 last=2`` reads "first comes after last", not the page's "From bar"
API_WORDS = (
    ("the From bar comes after the To bar", "first comes after last"),
    ("From bar: ", "first: "), ("To bar: ", "last: "), ("Beats per bar: ", "beats: "),
    ("seconds to add must", "seconds must"), ("length_seconds must be > 0 or null", "seconds must be > 0"),
    ("seed seconds must", "seed_seconds must"), (" or null (all of the seed)", ""),
    ("programs=", "instruments="), ("End the piece:", "ending=true:"), ("Seed starts at (seed_from)", "seed_from"),
    ("Random seed (seed)", "seed"),
    ("the Infill tab's Tracks box", "the infill endpoint's tracks field"),
    ("press Retry to draw again, or tick ", "send another seed, or tracks="),  # a track the model left silent
    ("press Retry to draw again", "send another seed"),
)


def in_api_words(text: str) -> str:
    """A refusal that the page and the command share, said with the API's field names (`API_WORDS`), on one line."""
    for page, api in API_WORDS:
        text = text.replace(page, api)
    return " ".join(text.split())


class Queue:
    """One request at a time, at most ``waiting`` more waiting; past that, `Busy` at once."""

    def __init__(self, waiting: int):
        self.waiting, self._in, self._count = waiting, threading.Lock(), 0
        self._work = threading.Lock()

    def __enter__(self):
        with self._in:
            if self._count > self.waiting:
                raise Busy(f"error: the server is busy ({self._count} requests in hand); try again shortly")
            self._count += 1
        self._work.acquire()

    def __exit__(self, *exc):
        self._work.release()
        with self._in:
            self._count -= 1


class Busy(Exception):
    pass


def upload_name(filename: str | None) -> str:
    """The name an upload is saved under, in its own folder: the client's name without folders, letters,
    digits, ``-``, ``_`` and ``.`` only (``..``, an empty or a hidden name: ``upload.mid``)."""
    name = re.sub(r"[^\w.-]+", "_", Path(filename or "").name)
    return "upload.mid" if name.strip(".") == "" or name.startswith(".") else name


def _fields(form, task: str) -> dict:
    """The endpoint's settings read from the form (unknown fields refused, each named), GenerateError."""
    known = FIELDS[task]
    unknown = sorted(set(form) - set(known) - {"file"})
    if unknown:
        raise GenerateError(f"{task}: unknown field(s) {', '.join(unknown)}; it takes file, {', '.join(known)}")
    values = {}
    for name, kind in known.items():
        text = str(form.get(name, "")).strip()
        if text == "":
            continue
        try:
            values[name] = kind(text)
        except ValueError:
            raise GenerateError(f"{name}={text}: not a {kind.__name__}") from None
    return values


def _continue(cont: Continuer, _filler: Filler, upload: Path, values: dict):
    if values.get("seed_from") == "end":  # the upload's last seed_seconds (the page's 20 s unless given)
        values = {**values, "seed_seconds": values.get("seed_seconds", Settings.seed_seconds)}
        values["seed_from"], values["seed_seconds"], _ = seed_at_end(upload, values["seed_seconds"])
    settings = Settings(num_samples=1, **{k: v for k, v in values.items() if k in
                                          ("seed_seconds", "seed_from", "seed", "temperature", "top_p",
                                           "density", "instruments", "drums", "ending")})
    if "seconds" in values:
        settings.length_seconds = values["seconds"]
    return cont.continue_file(upload, settings)[0]


def _fill(_cont: Continuer, filler: Filler, upload: Path, values: dict):
    return filler.fill(upload, values.get("first"), values.get("last"), values.get("tracks"),
                       beats=values.get("beats"), seed=values.get("seed", 0))


def _accompany(_cont: Continuer, filler: Filler, upload: Path, values: dict):
    roles = [r.strip() for r in values.get("tracks", "").split(",") if r.strip()]
    return filler.accompany(upload, roles or None, values.get("first"), values.get("last"), beats=values.get("beats"),
                            seed=values.get("seed", 0))


WORK = {"continue": _continue, "infill": _fill, "accompany": _accompany}  # each endpoint's tab


def _work(cont: Continuer, filler: Filler, task: str, upload: Path, values: dict):
    """The tab's own work on the saved upload; its first result."""
    return WORK[task](cont, filler, upload, values)


def api_routes(cont: Continuer, max_queue: int) -> list[Route]:
    """The API's routes, to serve beside the page (`musictx.app.cli`)."""
    filler, queue = Filler(cont), Queue(max_queue)
    folder = cont.workdir / "api_uploads"

    async def endpoint(request: Request) -> Response:
        task = request.path_params["task"]
        if task == HEALTH:  # its own route takes GET: any other method comes here
            return _wrong_method(task, "GET")
        if task not in FIELDS:
            return await unknown(request)
        if request.method != "POST":
            return _wrong_method(task, "POST")
        try:
            form = await request.form(max_files=1, max_fields=len(FIELDS[task]) + 1)
            upload = form.get("file")
            if upload is None or not hasattr(upload, "read"):
                raise GenerateError(f"{task}: no MIDI file: send it as the form field 'file' (curl -F file=@song.mid)")
            data = await upload.read()
            if len(data) > cont.max_upload_mb * 2**20:
                return PlainTextResponse(f"error: {upload.filename}: {too_large(len(data), cont.max_upload_mb)}\n", 413)
            values = _fields(form, task)
            own = folder / uuid.uuid4().hex  # the upload keeps its name: the results are named after it
            own.mkdir(parents=True)
            saved = own / upload_name(upload.filename)
            saved.write_bytes(data)
            try:
                result = await run_in_threadpool(_run, queue, cont, filler, task, saved, values)
            finally:
                shutil.rmtree(own, ignore_errors=True)  # the results are files of their own
        except Busy as err:
            return PlainTextResponse(f"{err}\n", 503)
        except HTTPException as err:  # the form's own refusals: more files or fields than it takes, a broken body
            return PlainTextResponse(f"error: {task}: {err.detail}\n", err.status_code)
        except USER_ERRORS as err:
            return PlainTextResponse(f"error: {in_api_words(str(err))}\n", 400)
        except Exception as err:  # noqa: BLE001 - a bug: one line to the caller, the traceback in the server log
            log.exception("api %s failed", task)
            return PlainTextResponse(f"error: something went wrong ({type(err).__name__}); the server log has more\n",
                                     500)
        return Response(result.midi.read_bytes(), media_type="audio/midi", headers={
            "Content-Disposition": f'attachment; filename="{result.midi.name}"',
            "X-Musictx-Model": _header_line(result.model_line, 300),
            # what was written, as the page's title says it: the bars an empty box reached (a cut included)
            "X-Musictx-Said": _header_line(in_api_words(". ".join(x for x in (result.title, result.seed_note) if x)),
                                           1000)})

    async def health(_request: Request) -> Response:
        return JSONResponse({"ok": True, "endpoints": [f"/api/{t}" for t in FIELDS],
                             "model": cont.models.pinned or "chosen per upload and task"})

    async def unknown(request: Request) -> Response:
        return PlainTextResponse(f"error: no endpoint {request.url.path}; there are {', '.join(FIELDS)} (POST) and "
                                 f"{HEALTH} (GET)\n", 404)

    # every path under /api/ answers in the API's own words (one line): no framework's JSON for a wrong method or path
    return [Route(f"/api/{HEALTH}", health, methods=["GET"]), Route("/api/{task}", endpoint, methods=METHODS),
            Route("/api/{rest:path}", unknown, methods=METHODS)]


HEALTH = "health"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _header_line(text: str | None, most: int) -> str:
    """``text`` as one header line of at most ``most`` characters, in the Latin-1 a header carries (others as ?)."""
    line = " ".join((text or "").replace("`", "").split())[:most]
    return line.encode("latin-1", "replace").decode("latin-1")


def _wrong_method(task: str, method: str) -> Response:
    return PlainTextResponse(f"error: /api/{task} takes {method}\n", 405, headers={"Allow": method})


def _run(queue: Queue, cont: Continuer, filler: Filler, task: str, upload: Path, values: dict):
    with queue:
        return _work(cont, filler, task, upload, values)
