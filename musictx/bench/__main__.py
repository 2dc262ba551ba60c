"""Dispatch ``python -m musictx.bench NAME [args]`` to ``musictx.bench.NAME.main(args)``."""

import importlib
import sys

BENCHES = ("attention", "attention_gpu", "train", "generate", "realtime", "hooks", "app",
           "tokenizers", "infill")  # data prep: python -m data_prep.bench


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHES:
        sys.exit(f"usage: python -m musictx.bench {{{','.join(BENCHES)}}} [options]  (NAME --help for options)")
    importlib.import_module(f"musictx.bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    main()
