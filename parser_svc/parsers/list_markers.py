"""List markers as a document shows them: a counter written in a numbering format (decimal,
letters, roman numerals), and the bullet characters of symbol fonts mapped to Unicode. Shared by
the Word (numbering definitions) and PowerPoint (auto-numbered paragraphs) readers."""

from __future__ import annotations

BULLET = "•"
# Symbol / Wingdings code points (private use area, or their ASCII position) that Word and
# PowerPoint use for bullets, as the glyph they draw.
SYMBOL_BULLETS = {
    "\uf0b7": "•",
    "\uf0a7": "▪",
    "\uf0d8": "➢",
    "\uf0fc": "✓",
    "\uf076": "❖",
    "\uf0a8": "◆",
    "§": "▪",
    "Ø": "➢",
    "ü": "✓",
    "v": "❖",
    "q": "❑",
    "n": "■",
    "o": "o",
}
_ROMAN = (
    (1000, "m"),
    (900, "cm"),
    (500, "d"),
    (400, "cd"),
    (100, "c"),
    (90, "xc"),
    (50, "l"),
    (40, "xl"),
    (10, "x"),
    (9, "ix"),
    (5, "v"),
    (4, "iv"),
    (1, "i"),
)


def roman(number: int) -> str:
    if number <= 0 or number >= 4000:
        return str(number)
    out = []
    for value, letters in _ROMAN:
        while number >= value:
            out.append(letters)
            number -= value
    return "".join(out)


def letters(number: int) -> str:
    """1 → a, 26 → z, 27 → aa (Word repeats the letter: 28 → bb); past zzzzzzzzzz (a start
    value a hostile file may set) as digits."""
    if number <= 0 or number > 26 * 10:
        return str(number)
    return chr(ord("a") + (number - 1) % 26) * ((number - 1) // 26 + 1)


def format_number(number: int, kind: str) -> str:
    """`number` in a numbering format named as Word names them (numFmt): "decimal",
    "decimalZero", "lowerLetter", "upperLetter", "lowerRoman", "upperRoman"; others decimal."""
    if kind == "lowerLetter":
        return letters(number)
    if kind == "upperLetter":
        return letters(number).upper()
    if kind == "lowerRoman":
        return roman(number)
    if kind == "upperRoman":
        return roman(number).upper()
    if kind == "decimalZero" and 0 <= number < 10:
        return f"0{number}"
    return str(number)


def bullet_marker(text: str) -> str:
    """A bullet character as shown: symbol-font code points mapped, empty text as "•"."""
    text = text.strip()
    if not text:
        return BULLET
    return SYMBOL_BULLETS.get(text, text)


# PowerPoint's a:buAutoNum types: the counter's style and the punctuation around it.
_AUTONUM_STYLES = {
    "arabic": "decimal",
    "alphaLc": "lowerLetter",
    "alphaUc": "upperLetter",
    "romanLc": "lowerRoman",
    "romanUc": "upperRoman",
}
_AUTONUM_PUNCTUATION = {
    "Period": "{}.",
    "ParenR": "{})",
    "ParenBoth": "({})",
    "Plain": "{}",
    "Minus": "{} -",
    "Colon": "{}:",
}


def autonum_marker(number: int, scheme: str) -> str:
    """The marker of PowerPoint's auto-numbering `scheme` ("arabicPeriod", "alphaLcParenR",
    "romanUcPeriod", ...) at `number`; unknown schemes as "1."."""
    for prefix, kind in _AUTONUM_STYLES.items():
        if scheme.startswith(prefix):
            rest = scheme[len(prefix) :]
            pattern = next(
                (p for key, p in _AUTONUM_PUNCTUATION.items() if rest.startswith(key)), "{}."
            )
            return pattern.format(format_number(number, kind))
    return f"{number}."
