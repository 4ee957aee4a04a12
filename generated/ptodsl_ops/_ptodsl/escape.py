"""Spec text in generated code: one escaping function per place it can land.

Specs and their file names come from other people, so no text of theirs may end a comment, a string
or a docstring early and continue as code. Each function here returns text that stays inside its
context whatever the input: a C++ ``//`` comment ends at a newline *or* a carriage return, and a
backslash at its end splices the next line into it; a C++ string literal must not hold a raw line
break, a lone ``"`` or a hex escape that swallows the following characters; a Python docstring ends
at ``\"\"\"`` (or at a ``"`` right before the closing quotes), and Python source may not hold NUL or
lone surrogates. Characters that could do any of this are written as escapes (``\\x0d``), so the
text stays readable and nothing is silently dropped.
"""

from __future__ import annotations


def _hex(c: str) -> str:
    n = ord(c)
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def _is_plain(c: str) -> bool:
    """Printable ASCII: the characters no context gives a second meaning to at line level."""
    return " " <= c <= "~"


def _escaped(text: str, table: dict[str, str], plain, other) -> str:
    """``text`` with the characters of ``table`` replaced, plain ones kept and the rest ``other(c)``."""
    return "".join(table[c] if c in table else c if plain(c) else other(c) for c in text)


def _octal(c: str) -> str:
    # three-digit octal escapes cannot absorb a following hex digit, unlike \x
    return "".join(f"\\{b:03o}" for b in c.encode("utf-8", errors="surrogatepass"))


def cpp_comment(text: str) -> str:
    """Text for a C++ ``//`` (or ``/* */``) comment: printable ASCII only, no line splice, no ``*/`` or ``/*``.

    Backslashes are escaped too, so a trailing one cannot continue the comment onto the next line;
    ``??`` is broken up for compilers that still read trigraphs (``??/`` is a backslash).
    """
    out = "".join(c if _is_plain(c) and c != "\\" else _hex(c) for c in text)
    return out.replace("/*", "/\\x2a").replace("*/", "*\\x2f").replace("??", "?\\x3f")


def cpp_string(text: str) -> str:
    """The body of a C++ narrow string literal (without the quotes) holding ``text`` as UTF-8.

    Octal escapes of three digits are used for everything outside printable ASCII: unlike ``\\x``
    they cannot absorb a following hex digit.
    """
    return _escaped(text, {"\\": "\\\\", '"': '\\"', "?": "\\?", "\n": "\\n"}, _is_plain, _octal)


def py_comment(text: str) -> str:
    """Text for a Python ``#`` comment: no line break of any kind, printable ASCII only."""
    return "".join(c if _is_plain(c) else _hex(c) for c in text)


def py_docstring(text: str) -> str:
    """The body of a ``\"\"\"`` docstring holding ``text``; newlines and tabs are kept as written.

    Every quote and backslash is escaped, so no run of quotes (including one just before the
    closing quotes) and no trailing backslash can end the string early. Other control characters,
    line separators other than ``\\n`` and surrogates become escapes, which Python source accepts.
    """
    return _escaped(text, {"\\": "\\\\", '"': '\\"'}, _docstring_plain, _hex)


def _docstring_plain(c: str) -> bool:
    return c in "\n\t" or (c >= " " and c != "\x7f" and not _unsafe_unicode(c))


# The explicit bidirectional formatting characters (embeddings, overrides, isolates and their
# terminators): they reorder how the text around them is displayed, so code can read differently
# from what it is ("Trojan source", CVE-2021-42574).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe_unicode(c: str) -> bool:
    n = ord(c)
    # C1 controls, the Unicode line/paragraph separators (str.splitlines breaks on them), BOM,
    # bidirectional controls and surrogates (not encodable as UTF-8).
    return (0x80 <= n < 0xA0 or n in (0x2028, 0x2029, 0x85, 0xFEFF) or c in BIDI_CONTROLS
            or 0xD800 <= n < 0xE000)


def py_string(text: str) -> str:
    """A double-quoted Python string literal of ``text``, on one line.

    Not JSON: JSON writes characters beyond U+FFFF as surrogate pairs, which Python reads as two
    lone surrogates.
    """
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif _is_plain(c) or (c > "\x7f" and not _unsafe_unicode(c)):
            out.append(c)
        else:
            out.append(_hex(c))
    return '"' + "".join(out) + '"'


def unprintable(text: str, allow_newline: bool = False) -> str | None:
    """The first character of ``text`` that spec strings may not hold, or None.

    Control characters, line and paragraph separators and surrogates have no use in names, file
    names or messages, and are the raw material of injections; the frontend rejects them.
    """
    for c in text:
        if c == "\n" and allow_newline:
            continue
        if c < " " and c != "\t" or c == "\x7f" or _unsafe_unicode(c):
            return c
    return None


__all__ = ["BIDI_CONTROLS", "cpp_comment", "cpp_string", "py_comment", "py_docstring", "py_string", "unprintable"]
