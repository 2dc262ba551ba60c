"""The one error a generation run raises for bad input."""


class GenerateError(ValueError):
    """A bad generation option or input file (a seed, a checkpoint, a tokenizer); the message names the
    option or the file. Defined at the bottom of the engine, so that its options, the tasks' seeds and the
    output folder all raise it."""
