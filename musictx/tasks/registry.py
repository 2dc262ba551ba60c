"""Every task a run can do, one line each: the one place a task's name is looked up. No torch at import."""

from __future__ import annotations

from musictx.decoding.errors import GenerateError
from musictx.tasks.task import Task
from musictx.tasks.task_accompany import Accompany
from musictx.tasks.task_continue import Continue
from musictx.tasks.task_infill import Infill

TASKS: dict[str, Task] = {task.name: task for task in (
    Continue(),
    Infill(),
    Accompany(),
)}
DEFAULT_TASK = "continue"


def task_named(name) -> Task:
    """The task called ``name`` (``task=`` on the command line); GenerateError naming the tasks there are."""
    if isinstance(name, Task):
        return name
    if name not in TASKS:
        raise GenerateError(f"task={name}: use one of {', '.join(TASKS)}")
    return TASKS[name]
