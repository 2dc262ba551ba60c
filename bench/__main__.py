"""Dispatch ``python -m bench NAME [args]`` to ``bench.NAME.main(args)``.

Every refusal and failure ends in one line ``python -m bench NAME: error: ...`` with status 1, as the
commands' do (`musictx.console.guard.command_guard`): a bad option (`musictx.console.args`), a model that
cannot be loaded (a pickled checkpoint), a bench's own ``SystemExit("why")``."""

import importlib
import sys

BENCHES = ("attention", "attention_gpu", "train", "generate", "realtime", "hooks", "app",
           "tokenizers", "infill", "copy_fit", "prep")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHES:
        given = f"no bench named {argv[0]!r}; " if argv else ""
        sys.exit(f"python -m bench: error: {given}usage: python -m bench {{{','.join(BENCHES)}}} "
                 "[options]  (NAME --help for options)")
    prog = f"python -m bench {argv[0]}"
    bench = importlib.import_module(f"bench.{argv[0]}")  # first: it sets OpenMP's environment
    from musictx.console.guard import command_guard  # loads torch

    # overwrite: a bench replaces its own result files (tables, JSON) from one run to the next
    with command_guard(prog, overwrite=True):
        try:
            bench.main(argv[1:])
        except SystemExit as stop:
            if not isinstance(stop.code, str):
                raise
            print(f"{prog}: error: {' '.join(stop.code.split())}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None


if __name__ == "__main__":
    main()
