"""The run behind ``musictx-generate`` and the app: its options (`generate_options.GenerateOptions`), the
model it picks (`model_choice`), a folder of seeds (`seed_folder`), progress bars (`progress`) and the output
folder it writes (`output_folder`); `continue_midi.run` ties them to a task (`musictx.tasks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from musictx.lazy import public_dir, public_face

# the public face: name -> the module under musictx.generation that defines it, imported when first asked for, so that
# ``--help`` and the option checks, which read this package's light modules, load no torch
_PUBLIC = {
    "GenerateOptions": "generate_options",
    "device_problem": "generate_options",
    "seed_at_end": "generate_options",
    "choose_model": "model_choice",
    "sample_name": "output_folder",
    "write_take": "output_folder",
    "apply_programs": "programs",
    "parse_programs": "programs",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:  # for readers and type checkers: where each name lives
    from musictx.generation.generate_options import GenerateOptions, device_problem, seed_at_end
    from musictx.generation.model_choice import choose_model
    from musictx.generation.output_folder import sample_name, write_take
    from musictx.generation.programs import apply_programs, parse_programs


__getattr__ = public_face(__name__, _PUBLIC)
__dir__ = public_dir(globals(), _PUBLIC)
