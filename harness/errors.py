"""The one exception type for mistakes a user can fix (bad file, bad flag, missing run)."""


class UserError(Exception):
    """A problem in the user's input. ``str(error)`` is one line naming the file, line or flag."""
