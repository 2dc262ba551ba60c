"""The errors a user can fix from their message alone, whichever module raises them."""


class UserError(ValueError):
    """A bad input, option or file, said in one line that names it. The commands' guard
    (`musictx.console.guard`) and the app catch this class, so a module deep in the library marks its own
    errors by subclassing it rather than the guard importing that module (and torch with it)."""
