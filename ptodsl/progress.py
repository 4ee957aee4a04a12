"""A one-line progress indicator on stderr for the commands that can take a while.

``[3/40] check specs/softmax.yaml`` is rewritten in place as work goes on and erased at the end.
It is written only to a terminal: when stderr is a file or a pipe (CI logs, ``2> log``), or with
``--quiet``, nothing is written at all, so logs hold only the commands' own output.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

# Carriage return, then "erase to the end of the line": the next status overwrites the last.
_ERASE = "\r\x1b[K"


def interactive(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal someone is watching."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Progress:
    """``with Progress(len(items), "check") as p: for x in items: p.step(x) ...``

    ``enabled`` defaults to "stderr is a terminal"; ``quiet`` turns it off whatever the stream.
    """

    def __init__(self, total: int, verb: str, *, stream: TextIO | None = None, quiet: bool = False,
                 enabled: bool | None = None):
        self.total = total
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = (interactive(self.stream) if enabled is None else enabled) and not quiet
        self.done = 0
        self._shown = False

    def step(self, what: str) -> None:
        """Start the next item, named ``what``."""
        self.done += 1
        self.status(what)

    def update(self, done: int, what: str) -> None:
        """``done`` items finished so far (work that advances in batches)."""
        self.done = done
        self.status(what)

    def status(self, what: str) -> None:
        """Say what the current item is doing now (a case of a spec, a build)."""
        if not self.enabled:
            return
        width = 100
        text = f"[{self.done}/{self.total}] {self.verb} {what}"
        if len(text) > width:
            text = text[: width - 3] + "..."
        self.stream.write(_ERASE + text)
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the status line, so that other output starts on a clean line."""
        if self._shown:
            self.stream.write(_ERASE)
            self.stream.flush()
            self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.clear()


__all__ = ["Progress", "interactive"]
