"""``musictx-app``: parse the options, load the model, serve the page (see `musictx.app`)."""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import shutil
import sys

from musictx.app.core import MAX_UPLOAD_MB, USER_ERRORS, Continuer

log = logging.getLogger("musictx.app")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="musictx-app", description="A local web page that continues MIDI files.")
    parser.add_argument("--model", default=None,
                        help="a shipped model name, a model folder or a .ckpt (default: the shipped 'piano')")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    parser.add_argument("--soundfont", default=None, help="a .sf2 for the audio (default: see musictx.audio)")
    parser.add_argument("--max-upload-mb", type=float, default=MAX_UPLOAD_MB, help="largest seed file accepted")
    parser.add_argument("--device", default="cpu", help="torch device of the model (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Entry point: load the model, build the page, serve it until Ctrl-C."""
    args = parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # a local app sends nothing out
    try:
        from musictx.app.page import build_page
    except ImportError:
        sys.exit("musictx-app: error: Gradio is not installed (pip install 'musictx[app]')")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # Gradio's own start-up requests
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        cont = Continuer(args.model, soundfont=args.soundfont, max_upload_mb=args.max_upload_mb, device=args.device)
    except USER_ERRORS as err:
        sys.exit(f"musictx-app: error: {err}")
    atexit.register(shutil.rmtree, cont.workdir, ignore_errors=True)
    log.info("model %s (%s); audio: %s", cont.meta["ref"], cont.meta["source"], cont.audio_reason or "on")
    page = build_page(cont)
    page.queue(default_concurrency_limit=1).launch(
        server_name=args.host, server_port=args.port, max_file_size=int(args.max_upload_mb * 2**20),
        allowed_paths=[str(cont.workdir)], show_error=False, ssr_mode=False, footer_links=[])
