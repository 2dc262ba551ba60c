"""``musictx-export``: a Lightning checkpoint -> a model folder (`musictx.checkpoints.export`).

    musictx-export outputs/piano/train/checkpoints/best-*.ckpt musictx/pretrained/piano --dtype float16
"""

from __future__ import annotations

import argparse

from musictx.checkpoints.export import export
from musictx.checkpoints.model_store import WEIGHT_DTYPES


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="musictx-export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a .ckpt written by musictx-train")
    parser.add_argument("output_dir", help="the model folder to write")
    parser.add_argument("--dtype", default="float16", choices=sorted(WEIGHT_DTYPES))
    parser.add_argument("--max-shard-mb", type=float, default=None,
                        help="split weights larger than this into files of at most this many MiB each")
    args = parser.parse_args(argv)
    if args.max_shard_mb is not None and args.max_shard_mb <= 0:
        parser.error(f"--max-shard-mb must be > 0, got {args.max_shard_mb}")
    out = export(args.checkpoint, args.output_dir, args.dtype, max_shard_mb=args.max_shard_mb)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
