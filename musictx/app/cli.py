"""``musictx-app``: parse the options, load the pinned model (if any), serve the page (see `musictx.app`).

Everything the app writes, Gradio's cache and uploads included, goes into one work folder kept under
`musictx.app.disk.Limits`; the folder is removed at exit, after Ctrl-C and after SIGTERM or SIGHUP alike
(what ``docker stop``, systemd and a closed terminal send)."""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import ipaddress
import logging
import math
import os
import shutil
import signal
import sys
import time

from musictx.app.core import DEFAULT_MAX_QUEUE, MAX_UPLOAD_MB, USER_ERRORS, Continuer
from musictx.app.disk import DEFAULT_KEEP_RESULTS, DEFAULT_MAX_DISK_MB, Limits, UploadGuard, make_workdir

log = logging.getLogger("musictx.app")
AUTH_ENV = "MUSICTX_APP_AUTH"  # USER:PASSWORD; unlike --auth, not shown to other users of the machine by ps


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="musictx-app", description="A local web page that continues MIDI files.")
    parser.add_argument("--model", default=None,
                        help="a shipped model name, a model folder or a .ckpt for every request (default: each upload "
                             "and tab gets the shipped model that fits it, as musictx-generate chooses)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    parser.add_argument("--soundfont", default=None, help="a .sf2 for the audio (default: see musictx.io.audio)")
    parser.add_argument("--max-upload-mb", type=float, default=MAX_UPLOAD_MB, help="largest seed file accepted")
    parser.add_argument("--keep-results", type=int, default=DEFAULT_KEEP_RESULTS,
                        help=f"continuations kept on disk, oldest removed first (default {DEFAULT_KEEP_RESULTS})")
    parser.add_argument("--max-disk-mb", type=float, default=DEFAULT_MAX_DISK_MB,
                        help="most MB the work folder holds: results, previews, uploads; oldest removed first "
                             f"(default {DEFAULT_MAX_DISK_MB:g})")
    parser.add_argument("--max-queue", type=int, default=DEFAULT_MAX_QUEUE,
                        help="requests that may wait; one more is told the server is busy "
                             f"(default {DEFAULT_MAX_QUEUE})")
    parser.add_argument("--auth", default=None, metavar="USER:PASSWORD",
                        help=f"ask for this login (default: ${AUTH_ENV}, which other users cannot see in ps)")
    parser.add_argument("--device", default="cpu", help="torch device of the model (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    return parser.parse_args(argv)


def parse_auth(text: str | None) -> tuple[str, str] | None:
    """(user, password) of ``USER:PASSWORD`` (the password may hold colons), None for none; ValueError."""
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not (sep and user and password):
        raise ValueError("the login must be USER:PASSWORD, both non-empty")
    return user, password


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the app to this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may well resolve to a public address
        return False


def host_warning(host: str, auth: tuple[str, str] | None) -> str | None:
    """The line printed when the app is reachable from other machines without a login, else None."""
    if is_loopback(host) or auth:
        return None
    return (f"musictx-app: warning: --host {host} lets other machines reach the app, and it has no login: anyone "
            f"who can reach it can use it (add one with --auth USER:PASSWORD or ${AUTH_ENV})")


def _interrupt(signum, frame):
    """SIGTERM and SIGHUP stop the app as Ctrl-C does: Gradio closes the server, atexit cleans up."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """Entry point: load the model, build the page, serve it until Ctrl-C, SIGTERM or SIGHUP."""
    args = parse_args(argv)
    try:
        auth = parse_auth(args.auth or os.environ.get(AUTH_ENV))
        limits = Limits(args.keep_results, args.max_disk_mb)
        check_numbers(args)
    except ValueError as err:
        sys.exit(f"musictx-app: error: {err}")
    warning = host_warning(args.host, auth)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    if importlib.util.find_spec("gradio") is None:
        sys.exit("musictx-app: error: Gradio is not installed (pip install 'musictx[app]')")
    workdir = make_workdir()
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        _serve(args, workdir, limits, auth)
    except KeyboardInterrupt:  # stopped before the server ran (loading the model): no traceback
        log.info("stopped")
    except Exception as err:  # noqa: BLE001 - a port in use, a bad soundfont: one line (MUSICTX_DEBUG=1: all)
        from musictx.console.guard import debugging, one_line

        if debugging():
            raise
        sys.exit(f"musictx-app: error: {one_line(err)} ({type(err).__name__})")
    exit_at_once()


def exit_at_once() -> None:
    """Exit 0 now, the work folder removed first (the atexit functions, run here). A request still generating runs
    in one of Gradio's daemon threads; the interpreter's own shutdown stopped that thread inside torch, and the
    process aborted ("terminate called without an active exception", SIGABRT) where a SIGTERM should exit 0."""
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def check_numbers(args: argparse.Namespace) -> None:
    """ValueError naming the first option out of its range (before the model loads)."""
    from musictx.generation import device_problem

    if args.max_queue < 1:
        raise ValueError(f"--max-queue must be >= 1, got {args.max_queue}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be from 0 to 65535, got {args.port}")
    if not (math.isfinite(args.max_upload_mb) and 0 < args.max_upload_mb <= 1024):
        raise ValueError(f"--max-upload-mb must be above 0 and at most 1024, got {args.max_upload_mb}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    problem = device_problem(args.device)
    if problem:
        raise ValueError(f"--device {args.device}: {problem.replace('device=', '--device ')}")


def _serve(args: argparse.Namespace, workdir, limits: Limits, auth: tuple[str, str] | None) -> None:
    # Gradio reads GRADIO_TEMP_DIR when imported: pointed at the work folder, its cache is that folder, and it
    # serves results written there as they are instead of keeping a second copy
    os.environ["GRADIO_TEMP_DIR"] = str(workdir)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # a local app sends nothing out
    from musictx.app.api import api_routes
    from musictx.app.page import build_page

    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # Gradio's own start-up requests
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        cont = Continuer(args.model, workdir=workdir, soundfont=args.soundfont, max_upload_mb=args.max_upload_mb,
                         device=args.device, limits=limits)
    except USER_ERRORS as err:
        sys.exit(f"musictx-app: error: {err}")
    log.info("%s; audio: %s; %s", cont.models.startup_line().replace("`", ""), cont.audio_reason or "on",
             limits.line())
    page = build_page(cont, args.max_queue)
    from starlette.middleware import Middleware

    # every upload is weighed against the disk allowance before Gradio reads its bytes (musictx.app.disk)
    guard = Middleware(UploadGuard, check=cont.upload_problem)
    routes = [] if auth else api_routes(cont, args.max_queue)  # a login guards the page; the API has none
    log.info("HTTP API: %s", f"http://{args.host}:{args.port}/api/continue|infill|accompany (docs/app-api.md)"
             if routes else "off (--auth is set, and the API has no login)")
    page.launch(server_name=args.host, server_port=args.port, max_file_size=int(args.max_upload_mb * 2**20),
                allowed_paths=[str(cont.workdir)], show_error=False, ssr_mode=False, footer_links=[], auth=auth,
                app_kwargs={"middleware": [guard], "routes": routes}, prevent_thread_lock=True)
    serve_until_stopped(page)


def serve_until_stopped(page) -> None:
    """Wait while ``page`` serves; at Ctrl-C (or SIGTERM, SIGHUP) stop it at once. Gradio's own wait closes only
    the server, which then waits up to 5 s for an open page's heartbeat connection to end; closing the page ends
    its heartbeats first."""
    try:
        while page.is_running:
            time.sleep(0.1)
    except KeyboardInterrupt:
        log.info("stopping")
        page.close(verbose=False)
