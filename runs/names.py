"""Public submitter names: accounts, imported authors and "anonymous" never pass for each other.

Accounts and imported authors have pages of their own (/submitters/<username>/ and
/submitters/imported/<name>/), and an imported name is shown with "(imported)". On top of
that, sign-up refuses a username that looks like a reserved word or an imported author's name:
compared by a skeleton in the spirit of Unicode TR39 (compatibility-folded, accents dropped,
Cyrillic and Greek look-alikes, i/I/l/1, o/O/0, rn/m, vv/w and cl/d read as one, case and
separators ignored), so "Anonymous", "аnonymous" (Cyrillic a) and "an0nym0us" are all
refused. No Django.
"""

from __future__ import annotations

import re
import unicodedata

RESERVED = ("anonymous", "imported", "admin", "administrator", "moderator", "benchloop", "lab")
IMPORTED_SUFFIX = " (imported)"

# Letters that render like a Latin letter or digit in common fonts (a subset of TR39's
# confusables.txt covering Latin look-alikes in Cyrillic and Greek, and ASCII digits).
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "ѕ": "s",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "һ": "h",
        "ԁ": "d",
        "ԛ": "q",
        "ԝ": "w",
        "ӏ": "l",
        "ɡ": "g",
        "А": "A",
        "В": "B",
        "Е": "E",
        "К": "K",
        "М": "M",
        "Н": "H",
        "О": "O",
        "Р": "P",
        "С": "C",
        "Т": "T",
        "У": "Y",
        "Х": "X",
        "Ѕ": "S",
        "І": "l",
        "Ј": "J",
        "Ӏ": "l",
        # Greek
        "α": "a",
        "ο": "o",
        "ν": "v",
        "ρ": "p",
        "ι": "i",
        "κ": "k",
        "υ": "u",
        "ϲ": "c",
        "Α": "A",
        "Β": "B",
        "Ε": "E",
        "Ζ": "Z",
        "Η": "H",
        "Ι": "l",
        "Κ": "K",
        "Μ": "M",
        "Ν": "N",
        "Ο": "O",
        "Ρ": "P",
        "Τ": "T",
        "Υ": "Y",
        "Χ": "X",
        "ı": "i",
    }
)
# After case folding: i, l, 1 and | are one letter (so are o and 0), whatever the case, so
# "ERIC", "ErIc" and "eric" agree, and so do "aIice" and "alice".
_AMBIGUOUS = str.maketrans({"i": "l", "1": "l", "|": "l", "0": "o"})
_MULTI = (("rn", "m"), ("vv", "w"), ("cl", "d"))
_SEPARATORS = re.compile(r"[\s_.\-·'’]+")


def skeleton(name: str) -> str:
    """A form of `name` under which names that look alike are equal."""
    text = unicodedata.normalize("NFKD", name or "")
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.translate(_LOOKALIKES).casefold().translate(_AMBIGUOUS)
    text = _SEPARATORS.sub("", text)
    for pair, letter in _MULTI:
        text = text.replace(pair, letter)
    return text


def imported_label(name: str) -> str:
    """How an imported author's name is shown: never the same text as an account's."""
    return f"{name}{IMPORTED_SUFFIX}"


def is_anonymous(name: str) -> bool:
    """Whether an imported author's name is only a way of saying "nobody in particular"."""
    return skeleton(name) in ("", skeleton("anonymous"))
