"""What the page says when a request fails (`run_request` and its kin: one line, never a traceback), and why an
uploaded file cannot be read, in the app's words: the MIDI libraries' own messages (exception
class names, a third party's "Invaild") mean nothing to the person who uploaded the file."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from musictx.decoding import GenerateError
from musictx.generation import parse_programs
from musictx.io.midi_io import MidiReadError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.safe_output import OutputError

log = logging.getLogger("musictx.app")
USER_ERRORS = (GenerateError, MidiReadError, TokenizerMismatchError, OutputError)  # OutputError: a full disk

DAMAGED = "a damaged MIDI file: it starts like one, but what follows cannot be read (cut short or corrupted)"
HEADER = b"MThd"  # every standard MIDI file starts with this chunk: 14 bytes with its length and fields
AUDIO_MAGIC = (b"RIFF", b"ID3", b"OggS", b"fLaC", b"\xff\xfb", b"\xff\xf3", b"FORM")
# why a performance model's sample stopped (`musictx.tasks.continue_seed.stop_reason`), in the page's words, not
# the option names "length_seconds" / "max_tokens"
STOPPED = defaultdict(lambda: "stopped", length_seconds="stopped at the seconds asked",
                      eos="the model ended it", max_tokens="stopped at the most events a sample may have")


def instruments_line(spec: str | None, take) -> str:
    """What the Instruments box asked of tracks that ``take`` (after `apply_programs`) does not have, with the
    tracks it has ("" when every name was found): the result kept their sound and the page said nothing."""
    found = take.record.get("programs", {})
    pairs = {name.strip().lower(): f"{name.strip()}={value.strip()}"
             for name, _, value in (part.partition("=") for part in (spec or "").split(",")) if name.strip()}
    missing = [pairs[name] for name in parse_programs(spec) if name not in found]
    if not missing:
        return ""
    music = take.music
    # a performance is one track, named after its seed ("musictx continuation of x.mid"), which PIANO also names
    tracks = [t.name for t in music.tracks if not t.is_drum] if hasattr(music, "tracks") else ["PIANO"]
    names = ", ".join(pair.partition("=")[0] for pair in missing)
    return (f"Instruments: no track is named {names} (the tracks: {', '.join(dict.fromkeys(tracks))}), so "
            f"{', '.join(missing)} changed nothing.")


def header_problem(path: Path) -> str | None:
    """Why ``path`` is not a MIDI file at all, judged from its first bytes, or None."""
    with open(path, "rb") as f:
        head = f.read(14)
    if head.startswith(HEADER):
        return None if len(head) >= 14 else f"cut short: {len(head)} bytes, less than a MIDI file's 14-byte header"
    if head.startswith(AUDIO_MAGIC):
        return "an audio file, not a MIDI file; the app continues MIDI files (.mid/.midi)"
    return "not a MIDI file (it does not start with a MIDI header)"


def reason_for_page(reason: str) -> str:
    """A reader's failure (`musictx.midi_io.MidiReadError`'s reason, or a message ending in one) in the app's
    words. `header_problem` has already turned away files that are not MIDI at all, so what the libraries
    still fail on is a file that starts as MIDI and breaks later."""
    return re.sub(r"unreadable MIDI \(.*\)$", DAMAGED, reason)


def for_the_page(err: Exception, path: Path) -> str:
    """The command-line message of ``err`` said for the page: the file's name, not its server path, and no
    advice about command-line options that the page does not have."""
    text = reason_for_page(str(err).replace(f"seed_midi={path}", path.name))
    return text.replace(" Leave seed_midi unset for unconditional generation.", "").strip()


# The command's option names that refusals shared with musictx-generate use, said as the page's boxes: a musician
# read "lower seed_from" and "e.g. programs=MELODY=73" and had no such box (the API says its own field names:
# `musictx.app.api.API_WORDS`)
PAGE_WORDS = (
    (r"lower seed_from\b", "lower Seed starts at"), (r"\bseed_from=(\S+?) s\b", r"\1 s"),
    (r"\bseed_from=(\S+?):", r"Seed starts at \1 s:"), (r"^programs[.=]", "Instruments box, "),
    (r"e\.g\. programs=MELODY=73,PIANO=0", "e.g. MELODY=73, PIANO=0"), (r"^density '", "Notes per bar box, '"),
)


def in_page_words(text: str) -> str:
    """A refusal shared with the command, in the page's words (`PAGE_WORDS`)."""
    for option, box in PAGE_WORDS:
        text = re.sub(option, box, text)
    return text


def _guarded(work: Callable, verb: str, expected: tuple) -> tuple[object, str | None]:
    """(work(), None), or (None, a one-line message): the page must keep serving whatever fails."""
    try:
        return work(), None
    except expected as err:
        return None, f"**Cannot {verb}:** {in_page_words(str(err))}"
    except Exception:  # log the trace on the server, show one line
        log.exception("%s failed", verb)
        return None, f"**Something went wrong** ({verb}; the details are in the server's log)."


def run_request(work: Callable[[], list]) -> tuple[list | None, str]:
    """(results, message) of ``work()``; a bad input or any failure becomes a message, never a traceback."""
    results, error = _guarded(work, "continue", USER_ERRORS)
    if error:
        return results, error
    ready = f"{len(results)} continuation(s) ready."
    lines = [f"{ready} {results[0].model_line}".strip() if results else ready]
    lines += [text for text in (results[0].seed_line, results[0].seed_note) if text] if results else []
    return results, "\n\n".join(lines)


def draw_request(work: Callable[[], Path]) -> tuple[Path | None, str]:
    """(png, message) of ``work()``, as `run_request`; a bad layer or head is a message too."""
    png, error = _guarded(work, "draw", (*USER_ERRORS, ValueError))
    return png, error or "Each orange note points to the earlier notes it attends to most (thicker: more)."


def preview_request(work: Callable[[], Path]) -> tuple[Path | None, str]:
    """(png, "") of ``work()``, or (None, a one-line message) for a seed file that cannot be drawn."""
    png, error = _guarded(work, "preview", USER_ERRORS)
    return png, error or ""


def task_request(work: Callable[[], object], verb: str) -> tuple[object | None, str]:
    """(result, message) of an infill or accompaniment request (`musictx.app.infill_tab`), as `run_request`."""
    result, error = _guarded(work, verb, USER_ERRORS)
    note = getattr(result, "seed_note", "")  # which tracks were played as another part, and who kept their notes
    done = f"Done: listen, then Keep it or Retry. {getattr(result, 'model_line', '')}".strip()
    return result, error or "\n\n".join(x for x in (done, note) if x)
