"""The lark grammar of the text form, loaded once, and syntax-error reporting.

Example::

    >>> tree = parse_tree("def f():\\n    pass\\n")
    >>> tree.children[0].data
    Token('RULE', 'funcdef')
"""

from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, \
    UnexpectedToken
from lark.indenter import DedentError, Indenter

from ..errors import ParseError

_GRAMMAR = Path(__file__).with_name("tir.lark")

#: readable spellings of the grammar's terminals, for "expected ..." messages
_SPELL = {"LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'",
          "RBRACE": "'}'", "COLON": "':'", "COMMA": "','", "DOT": "'.'", "EQUAL": "'='",
          "NAME": "a name", "NUMBER": "a number", "STRING": "a string",
          "_NEWLINE": "end of line", "_INDENT": "an indented block",
          "_DEDENT": "end of block", "$END": "end of text", "TILDE": "'~'",
          "NONE": "'None'", "TRUE": "'True'", "FALSE": "'False'", "NOT": "'not'",
          "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'",
          "PERCENT": "'%'", "MORETHAN": "'>'", "LESSTHAN": "'<'", "AT": "'@'"}


class _TirIndenter(Indenter):
    NL_type = "_NEWLINE"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def handle_NL(self, token):
        try:
            yield from super().handle_NL(token)
        except DedentError as err:
            # say where: the indentation belongs to the line after the newline token
            indent = len(token.rsplit("\n", 1)[1])
            raise _Dedent(str(err), token.end_line, indent + 1) from None


class _Dedent(Exception):
    def __init__(self, message, line, column):
        super().__init__(message)
        self.line, self.column = line, column


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(_GRAMMAR.read_text(), parser="lalr", postlex=_TirIndenter(),
                maybe_placeholders=False)


def parse_tree(text: str, filename: str | None = None, line_offset: int = 0,
               col_offset: int = 0) -> Tree:
    """Parse ``text`` into a lark tree; syntax errors become :class:`ParseError`.

    ``line_offset``/``col_offset`` shift reported positions (source inside a file).

    Example::

        >>> try:
        ...     parse_tree("def f(:\\n    pass\\n")
        ... except ParseError as err:
        ...     print(err.line, err.column)
        1 7
    """
    if not text.endswith("\n"):
        text += "\n"
    lines = text.splitlines()
    try:
        return _parser().parse(text)
    except UnexpectedInput as err:
        line, col = err.line, err.column
        if isinstance(err, UnexpectedEOF) or line is None or line < 1:
            line, col = len(lines), len(lines[-1]) + 1 if lines else 1
        raise ParseError(_describe(err), line=line + line_offset, column=col + col_offset,
                         source_line=_src(lines, line, col_offset), filename=filename) from None
    except _Dedent as err:
        raise ParseError(f"inconsistent indentation: this line does not line up with any "
                         f"enclosing block ({err})", line=err.line + line_offset,
                         column=err.column + col_offset,
                         source_line=_src(lines, err.line, col_offset),
                         filename=filename) from None


def _src(lines, line, col_offset):
    if 1 <= line <= len(lines):
        return " " * col_offset + lines[line - 1]
    return None


def _keyword(t: str) -> str:
    return repr(t.lower()) if t.isupper() and t.isalpha() else t


def _describe(err: UnexpectedInput) -> str:
    if isinstance(err, UnexpectedCharacters):
        return f"invalid syntax: unexpected character {err.char!r}"
    raw = set(getattr(err, "expected", ()) or ())
    if {"NAME", "NUMBER", "STRING"} <= raw:
        # an operand was expected: say so instead of listing every token that starts one
        raw -= {"NAME", "NUMBER", "STRING", "FSTRING", "LPAR", "LSQB", "LBRACE", "MINUS",
                "PLUS", "TILDE", "NONE", "TRUE", "FALSE", "NOT"}
        raw.add("an expression")
    expected = sorted(_SPELL.get(t, t if t == "an expression" else
                                 _keyword(t)) for t in raw)
    if isinstance(err, UnexpectedToken):
        tok = err.token
        found = _SPELL.get(tok.type, repr(str(tok)))
        if tok.type in ("_NEWLINE", "_INDENT", "_DEDENT", "$END"):
            found = _SPELL.get(tok.type, tok.type)
        msg = f"invalid syntax: unexpected {found}"
    else:
        msg = "invalid syntax: unexpected end of text"
    if expected:
        shown = ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")
        msg += f"; expected {shown}"
    return msg
