"""``musictx-export``: a Lightning checkpoint -> a model folder, or a model folder -> another dtype
(`musictx.checkpoints.export`).

    musictx-export outputs/piano/train/checkpoints/best-*.ckpt my_models/piano --dtype float16
    musictx-export my_models/piano my_models/piano_int8 --dtype int8

The folder may not be inside the installed package (the shipped models live there), ``/``, the home folder
or the checkpoint's own folder, and a model folder's files already there are not replaced without
``--overwrite`` (`musictx.safe_output`): all checked before the checkpoint is read. Each file is written
whole or not at all.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from musictx.checkpoints.export import export, left_with_source
from musictx.checkpoints.model_store import (
    CONFIG_FILE,
    CRITIC_FILE,
    NATIVE_TOKENIZER_FILE,
    STORED_DTYPES,
    WEIGHTS_FILE,
    ModelLoadError,
    resolve,
)
from musictx.console.args import OneLineParser
from musictx.console.guard import command_guard
from musictx.safe_output import check_new, check_target, check_writable

PROG = "musictx-export"


def check_output(checkpoint: str, output_dir: str, overwrite: bool) -> None:
    """OutputError when ``output_dir`` is refused or holds model files this export would replace."""
    try:
        kind, source = resolve(checkpoint)  # a shipped name: its folder
    except ModelLoadError:  # no such model: said by the export, once the output is settled
        kind, source = "checkpoint", None
    out = check_target(output_dir, "output_dir", inputs={"checkpoint": source if kind != "checkpoint" else None})
    check_writable(out, "output_dir")  # a file there, or a read-only place: said before anything is read
    if not overwrite:
        names = [CONFIG_FILE, WEIGHTS_FILE, NATIVE_TOKENIZER_FILE, CRITIC_FILE]
        check_new([out / n for n in names] + sorted(out.glob("model-*-of-*.safetensors")), "output_dir")


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a .ckpt written by musictx-train, a model folder or a shipped model's name")
    parser.add_argument("output_dir", help="the model folder to write")
    parser.add_argument("--dtype", default="float16", choices=sorted(STORED_DTYPES),
                        help="how the weights are stored (default: %(default)s)")
    parser.add_argument("--max-shard-mb", type=float, default=None, help="split weights larger than this into "
                        "files of at most this many MiB each (default: one file)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the model files output_dir holds already (else the export is refused)")
    args = parser.parse_args(argv)
    if args.max_shard_mb is not None and not (math.isfinite(args.max_shard_mb) and args.max_shard_mb > 0):
        parser.error(f"--max-shard-mb must be > 0, got {args.max_shard_mb}")
    with command_guard(PROG, overwrite=args.overwrite, flag="--overwrite"):
        check_output(args.checkpoint, args.output_dir, args.overwrite)
        out = export(args.checkpoint, args.output_dir, args.dtype, max_shard_mb=args.max_shard_mb)
        said = left_with_source(args.checkpoint, out, args.dtype)
    print(f"wrote {out}: {weights_said(Path(out), args.dtype)}")
    if said:  # the source's card, or its figures of another dtype: not the new folder's own
        print(f"{PROG}: {said}")


def weights_said(out: Path, dtype: str) -> str:
    """The dtype and size of the weights just written: the line said only the folder (float16 by default)."""
    names = json.loads((out / CONFIG_FILE).read_text()).get("weights_files") or [WEIGHTS_FILE]
    size = sum((out / name).stat().st_size for name in names)
    files = names[0] if len(names) == 1 else f"{len(names)} files"
    return f"{dtype} weights, {size / 2**20:.2f} MiB ({files})"


if __name__ == "__main__":
    main()
