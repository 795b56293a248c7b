"""Reading Debian's WordNet 3.0 database files (package ``wordnet-base``): where they are and
how one line of a ``data.*`` file parses. Shared by AutoInterp's default corpus (the glosses)
and the relation tables' common-word rule, check sets and recognizers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: Licence of WordNet 3.0 (as Debian's ``/usr/share/doc/wordnet-base/copyright`` names it).
WORDNET_LICENSE = "WordNet 3.0 license (Princeton University; permissive, BSD-style)"
#: Folders where WordNet's ``data.*`` files live: Debian 12+ installs them in
#: ``/usr/share/wordnet``, older releases and upstream in ``.../dict``. ``$WNSEARCHDIR`` (the
#: variable WordNet's own tools read) and ``$WNHOME/dict`` come first.
_WORDNET_DIRS = ("/usr/share/wordnet", "/usr/share/wordnet/dict", "/usr/local/WordNet-3.0/dict")
#: The four data files, in the order their synsets are yielded.
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")

@dataclass(frozen=True)
class WordNetSynset:
    """One synset of a WordNet ``data.*`` file (``wndb(5WN)``)."""

    offset: str
    pos: str
    lemmas: tuple[str, ...]
    definition: str
    examples: tuple[str, ...]

    @property
    def text(self) -> str:
        """The corpus text: ``lemma, lemma: definition; "example"; "example"``."""
        head = ", ".join(self.lemmas)
        body = "; ".join(([self.definition] if self.definition else []) + [f'"{example}"' for example in self.examples])
        return f"{head}: {body}" if head else body


# adjective lemmas may carry a syntactic marker: big(a), galore(ip), aforesaid(p)
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")
# a quoted example, optionally followed by an attribution (`"..." - Shakespeare`)
_EXAMPLE = re.compile(r'"([^"]*)"(?:\s*-+\s*[^;"]*)?')


def _split_gloss(gloss: str) -> tuple[str, tuple[str, ...]]:
    """A gloss ``definition; "example"; "example"`` -> (definition, examples); the first quote at the
    start or after ``;`` opens the examples (a quote inside the definition stays in it)."""
    gloss = gloss.strip()
    match = re.search(r'(?:^|;)\s*"', gloss)
    start = match.start() if match else len(gloss)  # no example: the whole gloss defines
    definition = gloss[:start].rstrip("; ").strip()
    return definition, tuple(ex.strip() for ex in _EXAMPLE.findall(gloss[start:]) if ex.strip())


def parse_wordnet_line(line: str) -> WordNetSynset | None:
    """Parse one line of a WordNet ``data.*`` file; ``None`` for the licence header lines
    (which start with spaces) and blank lines.

    Format (``wndb(5WN)``): ``offset lex_filenum ss_type w_cnt word lex_id [word lex_id...]
    p_cnt [ptr...] [frames...] | gloss``; ``w_cnt`` is two hex digits, ``p_cnt`` three
    decimal digits, each pointer four fields.
    """
    if not line.strip() or line.startswith(" "):
        return None
    data, _, gloss = line.partition(" | ")  # no gloss: the whole line is data, the gloss ""
    fields = data.split()
    try:
        offset, pos = fields[0], fields[2]
        w_cnt = int(fields[3], 16)
        words = fields[4 : 4 + 2 * w_cnt : 2]
        if len(words) != w_cnt:
            raise ValueError("truncated word list")
    except (IndexError, ValueError) as exc:
        raise ValueError(f"not a WordNet data line ({exc}): {line[:80]!r}") from None
    lemmas = tuple(_ADJ_MARKER.sub("", w).replace("_", " ") for w in words)
    return WordNetSynset(offset, pos, lemmas, *_split_gloss(gloss))  # (definition, examples)


def wordnet_dir(dict_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding WordNet's ``data.noun`` etc.; FileNotFoundError saying how to
    install it when there is none."""
    home = os.environ.get("WNHOME")
    found = [os.environ.get("WNSEARCHDIR"), home and os.path.join(home, "dict"), *_WORDNET_DIRS]
    candidates = [Path(dict_dir)] if dict_dir is not None else [Path(p) for p in found if p]
    for folder in candidates:
        if (folder / "data.noun").is_file():
            return folder
    raise FileNotFoundError(
        f"WordNet's data files (data.noun, ...) are not in {[str(c) for c in candidates]}: install Debian's "
        "wordnet-base package (`apt-get install wordnet-base`, or run `make setup` as root), set "
        "$WNSEARCHDIR to a WordNet dict folder, or pass --dataset with a Hugging Face dataset id or local text files"
    )
