"""``with`` for the objects that hold a model: leaving the block calls ``close()``."""


class Closing:
    """A base of a class with a close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
