"""FIND string functions (FIND §2.2, appendix F): a seeded procedural generator.

The ``strings`` config holds 1000 functions ``str -> str``: 30% atomic operations from
:data:`OPERATIONS`, 70% compositions ``f1(f2(s))`` (``name`` ``"f1∘f2"``; ``params`` lists the
operations in the order applied, ``f2`` first). ``code`` is built from the source of
:mod:`findbench.find.string_ops`; ``test_inputs`` are 10 seeded strings that reveal the
behaviour; ``unit_tests`` come from :func:`findbench.find.unit_tests.build_unit_tests`.
Degenerate compositions are never generated (same family twice, steps that cancel or hide each
other, or behaviour on a probe set equal to the identity, a constant, a part or an earlier
function); every composition differs from the identity and each step on some test input.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
import string
import textwrap
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from findbench import _checks, schema
from findbench.find import string_ops as ops
from findbench.find.unit_tests import NearMissTests, build_unit_tests, near_miss_tests

logger = logging.getLogger(__name__)

COMPOSITION_FRACTION = 0.7
N_TEST_INPUTS = 10


_COMMON_LOWER = "etaoinsrhldcum"
_SUBSTRINGS = ("th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ing", "the", "ion", "ou", "ea", "st", "ll", "ss")
_PUNCT = "-_.,!*#/"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_mapping(value: Any, where: str) -> None:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"{where} must be a non-empty mapping of lowercase letters, got {value!r}")
    for key, val in value.items():
        if not all(isinstance(item, str) and len(item) == 1 and item in string.ascii_lowercase for item in (key, val)):
            raise ValueError(f"{where} must map lowercase ASCII letters to lowercase ASCII letters, got {key!r}: {val!r}")
    if sorted(value.values()) != sorted(value.keys()):
        raise ValueError(f"{where} must be a permutation (its values must be its keys), got {dict(value)!r}")
    if all(key == val for key, val in value.items()):
        raise ValueError(f"{where} must move at least one letter, got the identity {dict(value)!r}")


#: parameter kind -> (valid?, what a valid value is); ``mapping`` has its own messages.
_KIND_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "char": (lambda v: isinstance(v, str) and len(v) == 1, "a single character"),
    "text": (lambda v: isinstance(v, str) and 1 <= len(v) <= 12, "a string of 1 to 12 characters"),
    "sub": (lambda v: isinstance(v, str) and 2 <= len(v) <= 6, "a substring of 2 to 6 characters"),
    "shift": (lambda v: _is_int(v) and v != 0 and -25 <= v <= 25, "a non-zero int in -25..25"),
    "index": (lambda v: _is_int(v) and 0 <= v <= 1000, "an int in 0..1000"),
    "count": (lambda v: _is_int(v) and 1 <= v <= 1000, "an int in 1..1000"),
    "direction": (lambda v: _is_int(v) and v in (1, -1), "1 (forward) or -1 (backward)"),
}


def _check_kind(kind: str, value: Any, where: str) -> None:
    if kind == "mapping":
        _check_mapping(value, where)
    elif not _KIND_CHECKS[kind][0](value):
        raise ValueError(f"{where} must be {_KIND_CHECKS[kind][1]}, got {value!r}")


def _mix(rng: random.Random, *options: tuple[float, Callable[[random.Random], Any]]) -> Any:
    """One draw from a mixture: ``options`` are ``(up_to, draw)`` pairs by increasing cumulative
    probability (the last ``up_to`` is 1); one uniform number picks the first ``draw`` below it."""
    u = rng.random()
    return next(draw for up_to, draw in options if u < up_to)(rng)


def _rand_case(rng: random.Random, ch: str) -> str:
    return ch.upper() if rng.random() < 0.3 else ch


def _sample_letter(rng: random.Random) -> str:
    pool = _COMMON_LOWER if rng.random() < 0.7 else string.ascii_lowercase
    return _rand_case(rng, rng.choice(pool))


def _sample_any_char(rng: random.Random) -> str:
    return _mix(rng, (0.65, _sample_letter), (0.8, lambda r: r.choice(string.digits)), (1, lambda r: r.choice(_PUNCT)))


def _sample_text(rng: random.Random) -> str:
    return _mix(rng, (0.6, lambda r: "".join(r.choice(string.ascii_letters) for _ in range(r.randint(1, 5)))),
                (0.8, lambda r: str(r.randint(0, 99))), (1, lambda r: r.choice(_PUNCT) * r.randint(1, 2)))


def _sample_sub(rng: random.Random) -> str:
    return rng.choice(_SUBSTRINGS)


def _sample_shift(rng: random.Random) -> int:
    # forward 1..13 or backward 1..12: every value is a different rotation of the alphabet
    return rng.choice([k for k in range(-12, 14) if k != 0])


def _sample_mapping(rng: random.Random) -> dict[str, str]:
    letters = rng.sample(string.ascii_lowercase, rng.randint(3, 6))
    shuffled = letters[:]
    while any(a == b for a, b in zip(letters, shuffled)):
        rng.shuffle(shuffled)
    return {a: b for a, b in sorted(zip(letters, shuffled))}


def _s_replace_char(rng: random.Random) -> dict:
    old = _sample_letter(rng) if rng.random() < 0.85 else " "
    new = old
    while new == old:
        new = _sample_any_char(rng)
    return {"old": old, "new": new}


def _s_replace_sub(rng: random.Random) -> dict:
    old = _sample_sub(rng)
    new = old
    while new == old:
        new = _sample_text(rng) if rng.random() < 0.8 else "_"  # _sample_text is never empty
    return {"old": old, "new": new}


def _s_split(rng: random.Random) -> dict:
    return {"char": _mix(rng, (0.35, lambda r: " "), (0.55, lambda r: r.choice("-,._/")), (1, _sample_letter))}


_q = repr


_NUM = "written as lowercase English words (e.g. 3 -> 'three', 21 -> 'twenty-one')"
_WRAP = "wrapping around from z to a and keeping each letter's case"
_VOWEL_SET = "vowels (a, e, i, o, u, in either case)"


def _dir(shift: int) -> str:
    return f"{abs(shift)} place{'s' if abs(shift) != 1 else ''} {'forward' if shift > 0 else 'backward'}"


def _count(what: str) -> Callable[[dict], str]:
    return lambda p: f"counts the {what} and returns the count {_NUM}"


def _order(where: str) -> Callable[[dict], str]:
    return lambda p: (
        f"returns the alphabet position of the {where} (a or A -> 'one', b or B -> 'two', ..., "
        f"z or Z -> 'twenty-six') written as lowercase English words, or 'none' if that character "
        f"is not an ASCII letter or the string is empty"
    )


def _too_short(index: int) -> str:
    return "the string is empty" if index == 0 else f"the string has {index} character{'s' if index != 1 else ''} or fewer"


def _mapping_text(mapping: Mapping[str, str]) -> str:
    return ", ".join(f"{k} -> {mapping[k]}" for k in sorted(mapping))


@dataclass(frozen=True)
class OpSpec:
    """One atomic string operation.

    Attributes:
        family: operations of one family never compose with each other.
        impl: the implementation in :mod:`string_ops`, ``impl(s, **params) -> str``.
        param_kinds: parameter name -> kind (char, text, sub, shift, index, count, direction, mapping).
        describe: parameters -> English verb phrase.
        composable: may be the inner function ``f2`` of a composition.
        hints: parameters -> what the test inputs should contain to reveal the behaviour.
        The boolean traits (``length_preserving``, ``case_only``, ``reorders``, ``case_invariant``,
        ``order_invariant``, ``length_only``) rule out degenerate compositions.
    """

    name: str
    family: str
    impl: Callable[..., str]
    param_kinds: dict[str, str]
    sample: Callable[[random.Random], dict]
    describe: Callable[[dict], str]
    composable: bool = True
    length_preserving: bool = False
    case_only: bool = False
    reorders: bool = False
    case_invariant: bool = False
    order_invariant: bool = False
    length_only: bool = False
    hints: Callable[[dict], dict] = field(default=lambda p: {})

    def call_expr(self, arg: str, params: Mapping[str, Any]) -> str:
        """Python expression applying this operation with literal parameters to ``arg`` (written into ``code``)."""
        return f"{self.impl.__name__}({arg}{''.join(f', {k}={_canonical(params[k])!r}' for k in self.param_kinds)})"

def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: value[k] for k in sorted(value)}
    return value


#: parameter kind -> how an operation draws it unless it names its own sampler
_SAMPLERS: dict[str, Callable[[random.Random], Any]] = {"char": _sample_any_char, "sub": _sample_sub, "shift": _sample_shift,
                                                        "text": _sample_text}


def _op(name, family, impl, kinds=None, sample=None, describe=None, **flags) -> OpSpec:
    kinds = dict(kinds or {})
    sample = sample or (lambda rng: {k: _SAMPLERS[kind](rng) for k, kind in kinds.items()})
    return OpSpec(name=name, family=family, impl=impl, param_kinds=kinds, sample=sample, describe=describe, **flags)


_CASE = dict(length_preserving=True, case_only=True)
_PERM = dict(length_preserving=True, reorders=True)
_PAD = lambda p: {"pad": True}  # noqa: E731
_WORDS = lambda p: {"multiword": True}  # noqa: E731
_DIGITS = lambda p: {"digits": True}  # noqa: E731
_CHAR = lambda p: {"chars": [p["char"]]}  # noqa: E731
_SUB = lambda p: {"subs": [p["sub"]]}  # noqa: E731

_OPS: list[OpSpec] = [
    # --- case
    _op("uppercase", "case", ops.uppercase, describe=lambda p: "converts every character to uppercase", **_CASE),
    _op("lowercase", "case", ops.lowercase, describe=lambda p: "converts every character to lowercase", **_CASE),
    _op("swapcase", "case", ops.swapcase, describe=lambda p: "swaps the case of every letter (uppercase becomes lowercase and lowercase becomes uppercase)", **_CASE),
    _op("capitalize_first", "case", ops.capitalize_first, describe=lambda p: "uppercases the first character and lowercases every other character", **_CASE),
    _op("title_case", "case", ops.title_case, describe=lambda p: "uppercases the first character of every whitespace-separated word and lowercases every other character", hints=_WORDS, **_CASE),
    _op("alternate_case", "case", ops.alternate_case, describe=lambda p: "alternates the case by position: characters at even 0-based positions (0, 2, 4, ...) become uppercase and characters at odd positions become lowercase, spaces and punctuation counting as positions", **_CASE),
    _op("uppercase_vowels", "case", ops.uppercase_vowels, describe=lambda p: "converts every lowercase vowel (a, e, i, o, u) to uppercase and leaves every other character unchanged", **_CASE),
    # --- reversals
    _op("reverse", "reverse", ops.reverse, describe=lambda p: "reverses the whole string", **_PERM),
    _op("reverse_words", "reverse", ops.reverse_words, describe=lambda p: "reverses the order of the whitespace-separated words (the last word comes first), leaving every whitespace character where it was", hints=_WORDS, **_PERM),
    _op("reverse_each_word", "reverse", ops.reverse_each_word, describe=lambda p: "reverses the characters inside each whitespace-separated word, keeping the words in their order and every whitespace character where it was", hints=_WORDS, **_PERM),
    _op("reverse_first_half", "reverse", ops.reverse_first_half, describe=lambda p: "reverses the first half of the string (its first len//2 characters) and keeps the rest unchanged", **_PERM),
    _op("reverse_second_half", "reverse", ops.reverse_second_half, describe=lambda p: "reverses the second half of the string (everything from 0-based index len//2 on, so the middle character of an odd-length string belongs to it) and keeps the first half unchanged", **_PERM),
    _op("swap_halves", "reverse", ops.swap_halves, describe=lambda p: "swaps the two halves: the second half (from 0-based index len//2 on) is followed by the first half (the first len//2 characters)", **_PERM),
    _op("reverse_vowels", "reverse", ops.reverse_vowels, describe=lambda p: f"reverses the order of the {_VOWEL_SET}: the vowels read from right to left are written back into the vowel positions, and every other character stays in place", **_PERM),
    # --- filters / extraction
    _op("extract_digits", "filter", ops.extract_digits, describe=lambda p: "keeps only the digits 0-9, in their original order, dropping every other character", case_invariant=True, hints=_DIGITS),
    _op("extract_letters", "filter", ops.extract_letters, describe=lambda p: "keeps only the ASCII letters (a-z, A-Z), in their original order, dropping every other character (spaces, digits, punctuation, accented letters)", hints=_DIGITS),
    _op("remove_digits", "filter", ops.remove_digits, describe=lambda p: "removes every digit 0-9", hints=_DIGITS),
    _op("remove_vowels", "filter", ops.remove_vowels, describe=lambda p: f"removes every one of the {_VOWEL_SET}"),
    _op("remove_duplicate_chars", "filter", ops.remove_duplicate_chars, describe=lambda p: "removes repeated characters, keeping only the first occurrence of each character (case-sensitive, spaces and punctuation included)"),
    _op("digits_to_words", "filter", ops.digits_to_words, describe=lambda p: "replaces every digit by its lowercase English name (e.g. '7' -> 'seven', '42' -> 'fourtwo') without adding spaces", hints=_DIGITS),
    # --- counts and lengths as words
    _op("length_word", "count", ops.length_word, describe=lambda p: f"returns the length of the string (its number of characters, spaces included) {_NUM}", case_invariant=True, order_invariant=True, length_only=True),
    _op("count_vowels_word", "count", ops.count_vowels_word, describe=_count(_VOWEL_SET), case_invariant=True, order_invariant=True),
    _op("count_consonants_word", "count", ops.count_consonants_word, describe=_count("consonants (ASCII letters that are not vowels, in either case)"), case_invariant=True, order_invariant=True),
    _op("count_digits_word", "count", ops.count_digits_word, describe=_count("digits 0-9"), case_invariant=True, order_invariant=True, hints=_DIGITS),
    _op("count_words_word", "count", ops.count_words_word, describe=_count("whitespace-separated words"), case_invariant=True, hints=_WORDS),
    _op("count_uppercase_word", "count", ops.count_uppercase_word, describe=_count("uppercase ASCII letters (A-Z)"), order_invariant=True),
    _op("count_char_word", "count", ops.count_char_word, {"char": "char"}, describe=lambda p: f"counts the occurrences of the character {_q(p['char'])} (case-sensitive) and returns the count {_NUM}", order_invariant=True, hints=_CHAR),
    _op("count_substring_word", "count", ops.count_substring_word, {"sub": "sub"}, describe=lambda p: f"counts the non-overlapping occurrences of the substring {_q(p['sub'])} (case-sensitive, scanning from left to right) and returns the count {_NUM}", hints=_SUB),
    _op("find_substring_word", "count", ops.find_substring_word, {"sub": "sub"}, describe=lambda p: f"finds the first occurrence of the substring {_q(p['sub'])} (case-sensitive) and returns its 0-based starting index {_NUM}, or 'none' if the substring does not occur", hints=_SUB),
    # --- characters at positions (outputs too short to compose further: not composable)
    _op("first_char", "position", ops.first_char, describe=lambda p: "returns only its first character (an empty string stays empty)", composable=False),
    _op("middle_char", "position", ops.middle_char, describe=lambda p: "returns only its middle character, the one at 0-based index len//2 (for an even length, the first character of the second half; an empty string stays empty)", composable=False),
    _op("last_char", "position", ops.last_char, describe=lambda p: "returns only its last character (an empty string stays empty)", composable=False),
    _op("char_at_index", "position", ops.char_at_index, {"index": "index"}, lambda r: {"index": r.randint(0, 9)}, lambda p: f"returns only the character at 0-based index {p['index']}, or the empty string if {_too_short(p['index'])}", composable=False, hints=lambda p: {"index": p["index"]}),
    _op("first_char_order", "position", ops.first_char_order, describe=_order("first character"), composable=False, case_invariant=True),
    _op("middle_char_order", "position", ops.middle_char_order, describe=_order("middle character (0-based index len//2)"), composable=False, case_invariant=True),
    _op("last_char_order", "position", ops.last_char_order, describe=_order("last character"), composable=False, case_invariant=True),
    # --- whitespace
    _op("strip_whitespace", "whitespace", ops.strip_whitespace, describe=lambda p: "removes all leading and trailing whitespace", hints=_PAD),
    _op("strip_left", "whitespace", ops.strip_left, describe=lambda p: "removes the leading whitespace (at the start) and keeps any trailing whitespace", hints=_PAD),
    _op("strip_right", "whitespace", ops.strip_right, describe=lambda p: "removes the trailing whitespace (at the end) and keeps any leading whitespace", hints=_PAD),
    _op("remove_whitespace", "whitespace", ops.remove_whitespace, describe=lambda p: "removes every whitespace character (spaces, tabs, newlines) wherever it is", hints=_PAD),
    _op("collapse_whitespace", "whitespace", ops.collapse_whitespace, describe=lambda p: "replaces every run of consecutive whitespace characters (also at the start and end) by a single space", hints=_PAD),
    # --- replacement / removal
    _op("replace_vowels", "replace", ops.replace_vowels, {"char": "char"}, lambda r: {"char": _rand_case(r, r.choice("bcdfghjklmnpqrstvwxyz") if r.random() < 0.6 else r.choice(string.digits + "*_#"))}, lambda p: f"replaces every one of the {_VOWEL_SET} with {_q(p['char'])}", length_preserving=True),
    _op("replace_char", "replace", ops.replace_char, {"old": "char", "new": "char"}, _s_replace_char, lambda p: f"replaces every occurrence of the character {_q(p['old'])} (case-sensitive) with {_q(p['new'])}", length_preserving=True, hints=lambda p: {"chars": [p["old"]]}),
    _op("replace_substring", "replace", ops.replace_substring, {"old": "sub", "new": "text"}, _s_replace_sub, lambda p: f"replaces every non-overlapping occurrence of the substring {_q(p['old'])} (case-sensitive, scanning from left to right) with {_q(p['new'])}", hints=lambda p: {"subs": [p["old"]]}),
    _op("replace_spaces", "replace", ops.replace_spaces, {"char": "char"}, lambda r: {"char": r.choice("_-*.+#") if r.random() < 0.6 else _sample_letter(r)}, lambda p: f"replaces every space character ' ' with {_q(p['char'])}", length_preserving=True, hints=_WORDS),
    _op("remove_char", "replace", ops.remove_char, {"char": "char"}, describe=lambda p: f"removes every occurrence of the character {_q(p['char'])} (case-sensitive)", hints=_CHAR),
    _op("remove_substring", "replace", ops.remove_substring, {"sub": "sub"}, describe=lambda p: f"removes every non-overlapping occurrence of the substring {_q(p['sub'])} (case-sensitive, scanning from left to right)", hints=_SUB),
    # --- shifts and ciphers
    _op("caesar_shift", "shift", ops.caesar_shift, {"shift": "shift"}, describe=lambda p: f"shifts every ASCII letter {_dir(p['shift'])} in the alphabet ({_WRAP}); other characters are unchanged", length_preserving=True),
    _op("caesar_shift_by_length", "shift", ops.caesar_shift_by_length, describe=lambda p: f"shifts every ASCII letter forward in the alphabet by as many places as the string has characters (its length, spaces included; {_WRAP}); other characters are unchanged", length_preserving=True),
    _op("caesar_shift_by_char_order", "shift", ops.caesar_shift_by_char_order, {"index": "index", "direction": "direction"}, lambda r: {"index": r.randint(0, 9), "direction": r.choice([1, -1])},
        lambda p: (f"reads the character at 0-based index {p['index']}; if it is an ASCII letter with alphabet position n (a/A = 1, ..., z/Z = 26), "
                   f"every ASCII letter of the string is shifted n places {'forward' if p['direction'] > 0 else 'backward'} in the alphabet ({_WRAP}) and other characters are unchanged; "
                   f"if {_too_short(p['index'])} or that character is not an ASCII letter, the string is returned unchanged"),
        length_preserving=True, hints=lambda p: {"index": p["index"]}),
    _op("shift_middle_char", "shift", ops.shift_middle_char, {"shift": "shift"}, describe=lambda p: f"shifts only the middle character (0-based index len//2) {_dir(p['shift'])} in the alphabet if it is an ASCII letter ({_WRAP}); everything else is unchanged", length_preserving=True),
    _op("shift_first_char", "shift", ops.shift_first_char, {"shift": "shift"}, describe=lambda p: f"shifts only the first character {_dir(p['shift'])} in the alphabet if it is an ASCII letter ({_WRAP}); everything else is unchanged", length_preserving=True),
    _op("shift_last_char", "shift", ops.shift_last_char, {"shift": "shift"}, describe=lambda p: f"shifts only the last character {_dir(p['shift'])} in the alphabet if it is an ASCII letter ({_WRAP}); everything else is unchanged", length_preserving=True),
    _op("atbash", "shift", ops.atbash, describe=lambda p: "replaces every ASCII letter by its mirror in the alphabet (a <-> z, b <-> y, c <-> x, ..., keeping case: the Atbash cipher); other characters are unchanged", length_preserving=True),
    _op("letter_permutation", "shift", ops.letter_permutation, {"mapping": "mapping"}, lambda r: {"mapping": _sample_mapping(r)},
        lambda p: f"substitutes letters with the permutation {_mapping_text(p['mapping'])} (applied to lowercase letters, and to their uppercase forms keeping uppercase); every other character is unchanged",
        length_preserving=True, hints=lambda p: {"chars": sorted(p["mapping"])}),
    # --- insertion and concatenation
    _op("insert_at_middle", "insert", ops.insert_at_middle, {"text": "text"}, describe=lambda p: f"inserts {_q(p['text'])} in the middle, i.e. just before the character at 0-based index len//2"),
    _op("insert_at_index", "insert", ops.insert_at_index, {"index": "index", "text": "text"}, lambda r: {"index": r.randint(1, 8), "text": _sample_text(r)}, lambda p: f"inserts {_q(p['text'])} just before the character at 0-based index {p['index']} (at the end if the string has {p['index']} characters or fewer)", hints=lambda p: {"index": p["index"]}),
    _op("append_if_missing", "insert", ops.append_if_missing, {"char": "char"}, lambda r: {"char": _sample_letter(r)}, lambda p: f"appends the character {_q(p['char'])} at the end if the string does not already contain it (case-sensitive), and otherwise returns the string unchanged", hints=_CHAR),
    _op("append_text", "insert", ops.append_text, {"text": "text"}, describe=lambda p: f"appends {_q(p['text'])} at the end"),
    _op("prepend_text", "insert", ops.prepend_text, {"text": "text"}, describe=lambda p: f"puts {_q(p['text'])} in front of it"),
    _op("insert_separator", "insert", ops.insert_separator, {"sep": "char"}, lambda r: {"sep": r.choice(["-", "_", " ", ".", "*", "|", "x", "0"])}, lambda p: f"inserts the character {_q(p['sep'])} between every two adjacent characters (e.g. 'abc' -> {_q(p['sep'].join('abc'))})"),
    _op("concat_reverse", "insert", ops.concat_reverse, describe=lambda p: "returns the string followed by its reverse (e.g. 'abc' -> 'abccba')"),
    # --- splitting
    _op("split_keep_first", "split", ops.split_keep_first, {"char": "char"}, _s_split, lambda p: f"splits the string on the character {_q(p['char'])} and returns the first piece, i.e. the text before the first {_q(p['char'])} (the whole string if it does not occur)", hints=_CHAR),
    _op("split_keep_last", "split", ops.split_keep_last, {"char": "char"}, _s_split, lambda p: f"splits the string on the character {_q(p['char'])} and returns the last piece, i.e. the text after the last {_q(p['char'])} (the whole string if it does not occur)", hints=_CHAR),
    _op("split_reverse_pieces", "split", ops.split_reverse_pieces, {"char": "char"}, _s_split, lambda p: f"splits the string on the character {_q(p['char'])}, reverses the order of the pieces and joins them again with {_q(p['char'])}", length_preserving=True, hints=_CHAR),
    # --- duplication
    _op("duplicate_first_char", "duplicate", ops.duplicate_first_char, describe=lambda p: "duplicates the first character (e.g. 'cat' -> 'ccat')"),
    _op("duplicate_middle_char", "duplicate", ops.duplicate_middle_char, describe=lambda p: "duplicates the middle character, the one at 0-based index len//2 (e.g. 'cat' -> 'caat', 'bird' -> 'birrd')"),
    _op("duplicate_last_char", "duplicate", ops.duplicate_last_char, describe=lambda p: "duplicates the last character (e.g. 'cat' -> 'catt')"),
    _op("duplicate_each_char", "duplicate", ops.duplicate_each_char, describe=lambda p: "doubles every character, spaces included (e.g. 'ab c' -> 'aabb  cc')"),
    # --- swaps
    _op("swap_first_last", "swap", ops.swap_first_last, describe=lambda p: "swaps the first and the last character (strings shorter than two characters are unchanged)", **_PERM),
    _op("swap_indices", "swap", ops.swap_indices, {"i": "index", "j": "index"}, lambda r: dict(zip("ij", sorted(r.sample(range(10), 2)))), lambda p: f"swaps the characters at 0-based indices {p['i']} and {p['j']} if the string has more than {p['j']} characters, and otherwise returns it unchanged", hints=lambda p: {"index": p["j"]}, **_PERM),
    _op("swap_adjacent_pairs", "swap", ops.swap_adjacent_pairs, describe=lambda p: "swaps each pair of adjacent characters, the 1st with the 2nd, the 3rd with the 4th, and so on (a final unpaired character stays in place)", **_PERM),
    _op("rotate_left", "swap", ops.rotate_left, {"k": "count"}, lambda r: {"k": r.randint(1, 5)}, lambda p: f"rotates the string {p['k']} place{'s' if p['k'] != 1 else ''} to the left: its first {p['k']} characters (the count taken modulo the length) move to the end, keeping their order", **_PERM),
]

#: name -> :class:`OpSpec` of every atomic operation.
OPERATIONS: dict[str, OpSpec] = {spec.name: spec for spec in _OPS}  # no name twice: tests/find/test_strings.py

_REPLACE_RULE = (lambda p: p["old"] != p["new"], "{where}.new must differ from {where}.old, both are {old!r}")
#: operation -> (valid?, the error's format, given ``where`` and the parameters): the constraints of
#: operations with parameters beyond each parameter's kind
_EXTRA_RULES: dict[str, tuple[Callable[[dict], bool], str]] = {
    "replace_char": _REPLACE_RULE, "replace_substring": _REPLACE_RULE,
    "swap_indices": (lambda p: p["i"] < p["j"], "{where}.i must be smaller than {where}.j, got i={i} j={j}"),
}


def _validate_step(k: int, step: Any) -> tuple[OpSpec, dict]:
    where = f"params.ops[{k}]"
    _checks.instance(where, step, Mapping, "a mapping {'op': name, 'params': {...}}")
    name = step.get("op")
    if name not in OPERATIONS:
        raise ValueError(f"{where}.op must be one of the {len(OPERATIONS)} operations in OPERATIONS, got {name!r}")
    spec = OPERATIONS[name]
    params = _checks.instance(f"{where}.params", step.get("params", {}), Mapping, "a mapping")
    missing = sorted(set(spec.param_kinds) - set(params))
    unknown = sorted(set(params) - set(spec.param_kinds))
    if missing:
        raise ValueError(f"{where}.params is missing {missing} for operation {name!r}")
    if unknown:
        raise ValueError(f"{where}.params has unknown key(s) {unknown} for operation {name!r}")
    for pname, kind in spec.param_kinds.items():
        _check_kind(kind, params[pname], f"{where}.params.{pname}")
    params = {pname: _canonical(params[pname]) for pname in spec.param_kinds}
    rule = _EXTRA_RULES.get(name)
    if rule is not None and not rule[0](params):
        raise ValueError(rule[1].format(where=f"{where}.params", **params))
    return spec, params


def validate_params(params: Any) -> list[tuple[OpSpec, dict]]:
    """Check a ``params`` object (mapping or JSON text) and return ``[(spec, op_params), ...]``
    in application order. Raises ValueError/TypeError naming the bad field."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except json.JSONDecodeError as exc:
            raise ValueError(f"params is not valid JSON text: {exc}") from None
    _checks.instance("params", params, Mapping, "a mapping or JSON text")
    steps = params.get("ops")
    if not isinstance(steps, (list, tuple)) or not 1 <= len(steps) <= 2:
        raise ValueError(f"params.ops must be a list of 1 or 2 operations, got {steps!r}")
    return [_validate_step(k, step) for k, step in enumerate(steps)]


def _as_params(steps: list[tuple[OpSpec, dict]]) -> dict:
    return {"ops": [{"op": spec.name, "params": p} for spec, p in steps]}


def function_name(steps: list[tuple[OpSpec, dict]]) -> str:
    """``"f1∘f2"`` for steps ``[f2, f1]`` (application order), the op name for one step."""
    return "∘".join(spec.name for spec, _ in reversed(steps))


def describe(steps: list[tuple[OpSpec, dict]]) -> str:
    """English description of the function made of ``steps`` (application order)."""
    if len(steps) == 1:
        spec, p = steps[0]
        return f"The function takes a string and {spec.describe(p)}."
    (inner, p_in), (outer, p_out) = steps
    return (
        "The function takes a string and applies two operations in sequence. "
        f"First, it {inner.describe(p_in)}. "
        f"Second, it takes the result of the first operation and {outer.describe(p_out)}. "
        "The output of the second operation is returned."
    )


@cache
def _source(fn: Callable) -> str:
    return textwrap.dedent(inspect.getsource(fn)).strip() + "\n"


_HELPERS = ("number_to_words", "shift_letter", "letter_order", "map_words")


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


@cache
def _helpers_of(fn: Callable) -> tuple[str, ...]:
    """Helpers of :mod:`string_ops` that ``fn`` needs, transitively, in a fixed order."""
    needed: set[str] = set()
    todo = [fn]
    while todo:
        for name in _global_names(todo.pop().__code__):
            if name in _HELPERS and name not in needed:
                needed.add(name)
                todo.append(getattr(ops, name))
    return tuple(h for h in _HELPERS if h in needed)


def function_code(steps: list[tuple[OpSpec, dict]]) -> str:
    """Self-contained Python source defining ``function(x)`` for ``steps`` (application order).

    The operations' source is copied from :mod:`string_ops`, so ``exec`` of this text behaves
    exactly like :func:`make_function`.
    """
    needed = {h for spec, _ in steps for h in _helpers_of(spec.impl)}
    impls = dict.fromkeys(spec.impl for spec, _ in steps)
    parts = [_source(getattr(ops, h)) for h in _HELPERS if h in needed] + [_source(fn) for fn in impls]
    if len(steps) == 1:
        spec, p = steps[0]
        body = f"def function(x):\n    return {spec.call_expr('x', p)}\n"
    else:
        (inner, p_in), (outer, p_out) = steps
        body = f"def function(x):\n    y = {inner.call_expr('x', p_in)}\n    return {outer.call_expr('y', p_out)}\n"
    return "\n\n".join(parts + [body])


def _compose(steps: list[tuple[OpSpec, dict]]) -> Callable[[str], str]:
    bound = [(spec.impl, dict(p)) for spec, p in steps]

    def function(x: str) -> str:
        _checks.instance("x", x, str, "a str")
        for impl, p in bound:
            x = impl(x, **p)
        return x

    return function


def make_function(row_or_params: Any) -> Callable[[str], str]:
    """The callable ``str -> str`` of a strings row, rebuilt from its ``params`` (no ``exec``).

    Accepts a row (a mapping with a ``params`` column), a params mapping ``{"ops": [...]}`` or
    its JSON text. Raises ValueError/TypeError naming the bad field.
    """
    params = row_or_params
    if isinstance(params, Mapping) and "ops" not in params:
        if "params" not in params:
            raise ValueError("row_or_params must be a row with a 'params' column or a params mapping with an 'ops' list")
        params = params["params"]
    return _compose(validate_params(params))


def composition_allowed(outer: OpSpec, inner: OpSpec) -> bool:
    """Structural ban list for ``outer∘inner`` (see the module docstring)."""
    return bool(inner.composable and outer.family != inner.family and not (outer.length_only and inner.length_preserving)
                and not (outer.case_invariant and inner.case_only) and not (outer.order_invariant and inner.reorders))


#: Fixed probe strings for behavioural de-duplication: every ASCII letter, digit and
#: punctuation mark and every sampled substring occurs somewhere, so parameterised functions
#: are told apart.
PROBES: tuple[str, ...] = (
    "", "a", "Ab", "abc", "Hello World", "  padded  text ", "\ttab\tand\nnewline ", "The quick brown fox jumps over the lazy dog",
    "MiXeD CaSe 123", "room 42b, floor 7", "aeiou AEIOU", "mississippi", "level", "one two  three", "abcdefghijklmnopqrstuvwxyz",
    "ZYXWVUTSRQPONMLKJIHGFEDCBA", "0123456789", "a-b_c.d,e!f*g#h/i", "then the thing in the inn at the station, sound and shell",
    "ere they read the stall ease; you are here ON AN island", "café Zoë naïve", "it's \"quoted\" \\ back", "Tom & Jerry: 3 mice?",
    "x1y2z3", "QUIZ jazz PYTHON",
)  # fmt: skip


@lru_cache(maxsize=4096)
def _step_signature(name: str, params_json: str) -> tuple[str, ...]:
    impl, params = OPERATIONS[name].impl, json.loads(params_json)
    return tuple(impl(p, **params) for p in PROBES)


def _steps_signature(steps: list[tuple[OpSpec, dict]]) -> tuple[str, ...]:
    """Probe signature of ``steps``; the parts' signatures are cached and reused."""
    (inner, p_in) = steps[0]
    sig = _step_signature(inner.name, schema.dumps(p_in))
    if len(steps) == 2:
        outer, p_out = steps[1]
        sig = tuple(outer.impl(y, **p_out) for y in sig)
    return sig


@cache
def _catalog_signatures() -> frozenset:
    """Probe signatures of every parameterless operation (a composition equal to one is degenerate)."""
    return frozenset(tuple(spec.impl(p) for p in PROBES) for spec in _OPS if not spec.param_kinds)


_IDENTITY = PROBES
#: The probes of two or more characters: what the inputs a function is tested on look like.
_NATURAL = tuple(i for i, probe in enumerate(PROBES) if len(probe.strip()) >= 2)


_WORDS_POOL = (
    "apple", "banana", "cherry", "garden", "window", "pencil", "rocket", "silver", "forest", "planet",
    "yellow", "button", "candle", "dragon", "engine", "flower", "guitar", "hammer", "island", "jacket",
    "kitten", "ladder", "marble", "needle", "orange", "pepper", "quartz", "rabbit", "saddle", "tunnel",
    "umbrella", "violet", "walnut", "zipper", "ocean", "cloud", "river", "stone", "light", "music",
    "house", "table", "bread", "chair", "dream", "earth", "field", "green", "heart", "juice",
    "knife", "lemon", "mouse", "night", "paper", "queen", "radio", "sugar", "tiger", "water",
    "cat", "dog", "sun", "sky", "tea", "map", "box", "key", "owl", "ink",
    "mississippi", "balloon", "coffee", "letter", "bookkeeper", "committee", "address", "puzzle", "yummy", "pizza",
    "teacher", "station", "thinking", "another", "weather", "nothing", "morning", "evening", "interest", "question",
    "the", "and", "in", "on", "at", "with", "under", "over", "about", "through",
    "read", "write", "build", "jump", "sing", "dance", "think", "open", "close", "travel",
    "quick", "happy", "small", "bright", "quiet", "strange", "gentle", "brave", "lucky", "sharp",
)
_NAMES = ("Alice", "Bob", "Carmen", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jamal",
          "Keiko", "Liam", "Maria", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sam", "Tariq",
          "Paris", "London", "Tokyo", "Cairo", "Lima", "Oslo", "Python", "Monday", "August", "Everest")
_SPECIAL = ("café au lait", "naïve Zoë", "jalapeño", "über cool", "crème brûlée", "señor García",
            "it's fine", "say \"hi\"", "back\\slash", "C:\\temp\\file", "don't stop", "tab\there",
            "50% off!", "a+b=c", "e-mail @home", "#hashtag")
_PUNCTS = (".", "!", "?", ",", ";", ":", "...")


def _word(rng: random.Random) -> str:
    return rng.choice(_WORDS_POOL)


def _phrase(rng: random.Random, lo: int, hi: int) -> str:
    words = [_word(rng) for _ in range(rng.randint(lo, hi))]
    if rng.random() < 0.3:
        words[rng.randrange(len(words))] = rng.choice(_NAMES)
    return " ".join(words)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _mixed_case(rng: random.Random, text: str) -> str:
    return "".join(ch.upper() if rng.random() < 0.5 else ch.lower() for ch in text)


def _phrase_input(rng: random.Random) -> str:
    text = _phrase(rng, 2, 4)
    return _cap(text) if rng.random() < 0.5 else text


def _alnum_input(rng: random.Random) -> str:
    return _mix(rng, (0.4, lambda r: _word(r) + str(r.randint(0, 999))), (0.7, lambda r: f"{r.randint(2, 99)} {_word(r)}s"),
                (1, lambda r: f"{_word(r)}{r.randint(0, 9)}{_word(r)}{r.randint(10, 99)}"))


#: input kind -> how a test input of that kind is drawn
_BASE_INPUTS: dict[str, Callable[[random.Random], str]] = {
    "word": _word,
    "capital": lambda rng: rng.choice(_NAMES) if rng.random() < 0.5 else _cap(_word(rng)),
    "upper": lambda rng: _word(rng).upper() if rng.random() < 0.6 else _phrase(rng, 2, 3).upper(),
    "mixed": lambda rng: _mixed_case(rng, _word(rng) if rng.random() < 0.5 else _phrase(rng, 2, 3)),
    "phrase": _phrase_input,
    "sentence": lambda rng: _cap(_phrase(rng, 4, 7)) + rng.choice(_PUNCTS),
    "alnum": _alnum_input,
    "digits": lambda rng: str(rng.randint(10, 99999)) if rng.random() < 0.5 else f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/{rng.randint(1990, 2030)}",
    "punct": lambda rng: f"{_cap(_word(rng))}, {_word(rng)}{rng.choice(_PUNCTS)}",
    "short": lambda rng: rng.choice(("a", "I", "ok", "Hi", "no", "x", "it", "Yo", "up", "ab")),
    "special": lambda rng: rng.choice(_SPECIAL),
}


_KINDS = ("word", "capital", "phrase", "mixed", "alnum", "sentence", "upper", "punct", "phrase", "word")


def _insert(rng: random.Random, text: str, piece: str) -> str:
    pos = rng.randint(0, len(text))
    return text[:pos] + piece + text[pos:]


def _apply_hints(rng: random.Random, inputs: list[str], hints: dict) -> list[str]:
    out = list(inputs)
    n = len(out)
    slots = list(range(n))
    # parameter characters / substrings: top up the inputs that lack them until about half to
    # most of the inputs contain them (a letter sometimes in the other case, to show case-sensitivity)
    for piece, repeats in [(c, (1, 1, 2, 3)) for c in hints.get("chars", ())] + [(t, (1, 1, 2)) for t in hints.get("subs", ())]:
        lacking = [i for i in slots if piece not in out[i]]
        target = rng.randint(n // 2, n - 2)
        need = max(0, target - (n - len(lacking)))
        for i in rng.sample(lacking, min(need, len(lacking))):
            variant = piece.swapcase() if piece.isalpha() and rng.random() < 0.25 else piece
            for _ in range(rng.choice(repeats)):
                out[i] = _insert(rng, out[i], variant)
    # digits / a second word: added to the inputs that lack them among half of the inputs
    for hint, lacks, add in (
        ("digits", lambda t: not any(ch.isdigit() for ch in t), lambda t: _insert(rng, t, str(rng.randint(0, 999)))),
        ("multiword", lambda t: len(t.split()) < 2, lambda t: f"{t} {_phrase(rng, 1, 3)}"),
    ):
        if hints.get(hint):
            for i in rng.sample(slots, n // 2):
                if lacks(out[i]):
                    out[i] = add(out[i])
    if hints.get("pad"):
        for i in rng.sample(slots, rng.randint(n // 2, n - 2)):
            left = rng.choice(("", " ", "  ", "\t", " \n"))
            right = rng.choice(("", " ", "   ", "\n", " \t"))
            if not left and not right:
                left = " "
            text = out[i]
            if rng.random() < 0.4 and " " in text:
                text = text.replace(" ", rng.choice(("  ", " \t", "   ")), 1)
            out[i] = left + text + right
    if "index" in hints:
        idx = hints["index"]
        short = rng.sample(slots, 2)
        for i in slots:
            if i in short:
                if idx >= 1 and len(out[i]) > idx:
                    out[i] = out[i][: rng.randint(1, idx)]
            else:
                while len(out[i]) <= idx + 1:
                    out[i] = f"{out[i]} {_word(rng)}"
    return out


#: hint -> how two steps' values of it merge (the others, flags, by ``or``)
_MERGE_HINTS: dict[str, Callable[[Any, Any], Any]] = {
    "chars": lambda a, b: sorted(set(a or []) | set(b)),
    "subs": lambda a, b: sorted(set(a or []) | set(b)),
    "index": lambda a, b: max(a or 0, b),
}


def _merge_hints(steps: list[tuple[OpSpec, dict]]) -> dict:
    """Union of the steps' hints; the outer step's hints are skipped after a count (its input
    is then a number word, whatever the test input contains)."""
    merged: dict = {}
    if len(steps) == 2 and steps[0][0].family == "count":
        steps = steps[:1]
    for spec, p in steps:
        for key, value in spec.hints(p).items():
            merged[key] = _MERGE_HINTS.get(key, lambda a, b: a or b)(merged.get(key), value)
    return merged


def _make_test_inputs(rng: random.Random, fn: Callable[[str], str], hints: dict, n: int = N_TEST_INPUTS, attempts: int = 8,
                      parts: Sequence[Callable[[str], str]] = ()) -> list[str]:
    """``n`` distinct non-empty inputs for ``fn``: a seeded mix of words, phrases, mixed case,
    digits, punctuation and (sometimes) unicode/quotes, edited by the operation's hints; the
    draw that tells ``fn`` apart from each of ``parts`` (a composition's steps alone) on some
    input, then changes the most inputs and gives the most distinct outputs, wins (up to four
    times the attempts while some part is not told apart)."""
    best: tuple[tuple[int, ...], list[str]] | None = None
    pieces = list(hints.get("chars", ())) + list(hints.get("subs", ()))
    for attempt in range(4 * attempts if parts else attempts):
        if attempt >= attempts and best is not None and best[0][0] == len(parts):
            break
        kinds = list(_KINDS)
        for kind, chance in (("special", 0.4), ("short", 0.3), ("digits", 0.3)):
            if rng.random() < chance:
                kinds[rng.randrange(n)] = kind
        rng.shuffle(kinds)
        inputs: list[str] = []
        for kind in kinds[:n]:
            text = _BASE_INPUTS[kind](rng)
            while text in inputs:
                text = _phrase_input(rng)
            inputs.append(text)
        inputs = _apply_hints(rng, inputs, hints)
        for i in range(n):
            while not inputs[i] or inputs[i] in inputs[:i]:
                inputs[i] = _phrase(rng, 2, 4)
        outputs = [fn(x) for x in inputs]
        # capped: beyond 6 changed inputs, keep the hint mix (e.g. inputs with and without
        # the character of append_if_missing) rather than chase more changes
        # first: every parameter character/substring occurs in some inputs but not in all
        covered = sum(3 <= sum(piece in x for x in inputs) <= n - 1 for piece in pieces)
        told_apart = sum(any(g(x) != y for x, y in zip(inputs, outputs)) for g in parts)
        score = (told_apart, covered, min(len(set(outputs)), 7), min(sum(y != x for x, y in zip(inputs, outputs)), 6))
        if best is None or score > best[0]:
            best = (score, inputs)
        if score == (len(parts), len(pieces), 7, 6):
            break
    assert best is not None
    return best[1]


def _draw_steps(rng: random.Random, specs: list[OpSpec]) -> list[tuple[OpSpec, dict]]:
    return [(spec, {k: _canonical(v) for k, v in spec.sample(rng).items()}) for spec in specs]


def _key(steps: list[tuple[OpSpec, dict]]) -> str:
    return schema.dumps(_as_params(steps))


def _shows_both_steps(steps: list[tuple[OpSpec, dict]], sig: tuple[str, ...]) -> bool:
    """Whether a composition differs from the identity and from each step alone on at least
    three probes of two or more characters (appending text and then reading the first letter
    does not: its first step never shows on the inputs a function is tested on; swapping the
    letters at 4 and 9 and then reading the last one shows only on ten-letter inputs)."""
    others = (_IDENTITY, *(_step_signature(spec.name, schema.dumps(p)) for spec, p in steps))
    return all(sum(sig[i] != other[i] for i in _NATURAL) >= 3 for other in others)


def _accept(steps, sig, seen_keys, seen_sigs) -> bool:
    if _key(steps) in seen_keys or sig in seen_sigs or sig == _IDENTITY or len(set(sig[1:])) == 1:
        return False  # seen, the identity, or constant on non-empty probes
    # a composition equal to a parameterless operation or to one of its steps alone is degenerate
    return len(steps) < 2 or not (sig in _catalog_signatures()
                                  or any(sig == _step_signature(spec.name, schema.dumps(p)) for spec, p in steps))


def degenerate(row: Mapping[str, Any]) -> str | None:
    """Why a row's description would not say what it does on its own test inputs (``None``
    when it does): a composition whose outputs there equal its input's, or one step's alone."""
    steps = validate_params(row["params"])
    if len(steps) < 2:
        return None
    inputs = list(row["test_inputs"])
    outputs = [_compose(steps)(x) for x in inputs]
    if outputs == inputs:
        return "the composition is the identity on its test inputs"
    for k, step in enumerate(steps):
        if [_compose([step])(x) for x in inputs] == outputs:
            return f"the composition equals its {('first', 'second')[k]} step alone on its test inputs"
    return None


def _sample_functions(n: int, rng: random.Random) -> list[list[tuple[OpSpec, dict]]]:
    n_comp = round(COMPOSITION_FRACTION * n)
    n_atomic = n - n_comp
    seen_keys: set[str] = set()
    seen_sigs: set[tuple] = set()
    chosen: list[list[tuple[OpSpec, dict]]] = []

    def take(steps, k: int | None = None) -> bool:
        """Keep ``steps`` if new and not degenerate: appended, or in place of function ``k`` (which
        must also show both its steps)."""
        sig = _steps_signature(steps)
        if not _accept(steps, sig, seen_keys, seen_sigs) or (k is not None and not _shows_both_steps(steps, sig)):
            return False
        seen_keys.add(_key(steps))
        seen_sigs.add(sig)
        if k is None:
            chosen.append(steps)
        else:
            chosen[k] = steps
        return True

    def take_composition(r: random.Random, k: int | None = None) -> bool:
        outer, inner = r.choice(_OPS), r.choice(composable)
        return composition_allowed(outer, inner) and take(_draw_steps(r, [inner, outer]), k)

    def fill(target: int, wanted: int, what: str, draw: Callable[[], bool]) -> None:
        """``draw()`` until ``target`` functions are chosen; ValueError when ``200 * wanted + 1000``
        draws (``wanted``: how many ``what`` this step is to choose) do not get there."""
        tries = 0
        while len(chosen) < target:
            tries += 1
            if tries > 200 * wanted + 1000:
                raise ValueError(f"n={n} is too large: cannot draw {wanted} distinct {what}")
            draw()

    # atomic: every operation once (shuffled) while there is room, then parameterised ones
    order = list(_OPS)
    rng.shuffle(order)
    for spec in order[:n_atomic]:
        for _ in range(50):
            if take(_draw_steps(rng, [spec])):
                break
    parameterised = [spec for spec in _OPS if spec.param_kinds]
    fill(n_atomic, n_atomic, "atomic string functions", lambda: take(_draw_steps(rng, [rng.choice(parameterised)])))
    composable = [spec for spec in _OPS if spec.composable]
    fill(n, n_comp, "compositions", lambda: take_composition(rng))
    # A composition whose first or second step never shows on inputs of two or more
    # characters is replaced by one drawn from its own stream, so every other function (and
    # the main stream's later draws) stays as it was.
    for k, steps in enumerate(chosen):
        if len(steps) == 2 and not _shows_both_steps(steps, _steps_signature(steps)):
            seen_keys.discard(_key(steps))
            seen_sigs.discard(_steps_signature(steps))
            sub = random.Random(f"replace:{k}:{_key(steps)}")
            while not take_composition(sub, k):
                pass
    return chosen


def _near_values(spec: OpSpec, name: str, value: Any, rng: random.Random) -> list[Any]:
    """Values near ``value`` for parameter ``name`` of ``spec``: one step either way for numbers
    (the opposite direction too for shifts), the other case of a letter, the inverse permutation,
    and one value the operation's own sampler draws."""
    kind = spec.param_kinds[name]
    if kind == "shift":
        return [value - 1, value + 1, -value]
    if kind in ("index", "count"):
        return [value - 1, value + 1]
    if kind == "direction":
        return [-value]
    near = [value.swapcase()] if kind == "char" and value.isalpha() else []
    if kind == "mapping":
        near.append({b: a for a, b in value.items()})
    return near + [spec.sample(rng)[name]]


def _valid_step(spec: OpSpec, params: dict) -> dict | None:
    """``params`` in canonical form when they are valid for ``spec``, else None."""
    try:
        return _validate_step(0, {"op": spec.name, "params": params})[1]
    except ValueError:
        return None


def near_miss_steps(steps: list[tuple[OpSpec, dict]], rng: random.Random) -> list[list[tuple[OpSpec, dict]]]:
    """The near misses of the function made of ``steps``: every function that differs from it in
    one step, by one parameter (:func:`_near_values`) or by a sibling operation (another operation
    of the step's family, keeping the parameters it shares with the step when they are valid for
    it, drawing the others with its sampler). Duplicates and the function itself are left out."""
    out, seen = [], {_key(steps)}
    for k, (spec, p) in enumerate(steps):
        variants = [(spec, {**p, name: v}) for name in spec.param_kinds for v in _near_values(spec, name, p[name], rng)]
        for sib in _OPS:
            if sib.family == spec.family and sib is not spec:
                drawn = sib.sample(rng)
                reused = {n: p[n] for n in sib.param_kinds if n in p and _valid_step(sib, {**drawn, n: p[n]}) is not None}
                variants.append((sib, {**drawn, **reused}))
        for op, params in variants:
            valid = _valid_step(op, params)
            new = [*steps[:k], (op, valid), *steps[k + 1 :]] if valid is not None else None
            if new is not None and _key(new) not in seen:
                seen.add(_key(new))
                out.append(new)
    return out


#: Inputs drawn (in batches of the generator's own test inputs) beyond a function's test inputs
#: when too few of those tell its near misses apart.
N_NEAR_EXTRA_BATCHES = 3


def near_miss_unit_tests(steps: list[tuple[OpSpec, dict]], test_inputs: Sequence[str], rng: random.Random) -> NearMissTests:
    """``unit_tests_near`` of one function: per input, the correct pair ``(x, f(x))`` and two pairs
    ``(x, g(x))`` of near misses ``g`` (:func:`near_miss_steps`, in a fresh random order per input)
    whose outputs differ from ``f(x)`` and from each other. The inputs are the function's test
    inputs, then new ones drawn like them while some of those have fewer than two such near misses."""
    fn = _compose(steps)
    misses = [_compose(m) for m in near_miss_steps(steps, rng)]

    def candidates():
        seen = set()
        for batch in range(N_NEAR_EXTRA_BATCHES + 1):
            for x in test_inputs if batch == 0 else _make_test_inputs(rng, fn, _merge_hints(steps)):
                if x not in seen:
                    seen.add(x)
                    yield (x, fn(x))

    def near(item):
        x, y = item
        order = list(misses)
        rng.shuffle(order)
        return ((x, out) for g in order if (out := g(x)) != y)

    return near_miss_tests(candidates(), near, rng=rng)


def generate(n: int = 1000, seed: int = 0, *, progress: bool = True) -> list[dict]:
    """Generate ``n`` FIND string functions as schema rows (``round(0.7 * n)`` compositions).

    Every draw derives from ``seed``; ids run from ``"strings/f00000"``. With ``n == 1`` there is
    no distractor source and ``unit_tests`` is empty. ValueError when ``n`` exceeds the number of
    distinct functions the registry can make.
    """
    from tqdm.auto import tqdm

    rng = random.Random(seed)
    functions = _sample_functions(n, rng)
    rng.shuffle(functions)
    logger.info("strings: %d functions (%d compositions) for seed %d", len(functions), sum(len(s) == 2 for s in functions), seed)

    fns = [_compose(steps) for steps in functions]
    all_inputs: list[list[str]] = []
    for steps, fn in tqdm(list(zip(functions, fns)), desc="strings test inputs", disable=not progress):
        sub = random.Random(rng.getrandbits(64))
        # a composition must not look like the identity or one of its steps on its own inputs
        parts = [str, *(_compose([step]) for step in steps)] if len(steps) > 1 else []
        all_inputs.append(_make_test_inputs(sub, fn, _merge_hints(steps), parts=parts))
    items = [[(x, fn(x)) for x in inputs] for inputs, fn in zip(all_inputs, fns)]
    unit_seed = rng.getrandbits(63)
    # a distractor pair (x, y) with f(x) == y would be a second right answer
    tests = (
        build_unit_tests(items, seed=unit_seed, is_correct=lambda i, item: fns[i](item[0]) == item[1])
        if n >= 2
        else [[] for _ in items]
    )

    # near misses draw from a stream per function of their own: the draws above stay as they were
    near = []
    for i, (steps, inputs) in enumerate(zip(functions, all_inputs)):
        try:
            near.append(near_miss_unit_tests(steps, inputs, random.Random(f"strings-near:{seed}:{i}")))
        except ValueError as exc:
            raise ValueError(f"unit_tests_near of {schema.function_id('strings', i)} ({function_name(steps)}): {exc}") from None
    if sum(t.skipped for t in near):
        logger.info("strings: %d test inputs without two distinct near misses were replaced", sum(t.skipped for t in near))
    rows = [
        schema.empty_row(
            function_id=schema.function_id("strings", i),
            category="strings",
            subcategory="atomic" if len(steps) == 1 else "composition",
            name=function_name(steps),
            params=schema.dumps(_as_params(steps)),
            code=function_code(steps),
            description=describe(steps),
            source="procedural",
            test_inputs=list(inputs),
            unit_tests=function_tests,
            unit_tests_near=near[i].tests,
        )
        for i, (steps, inputs, function_tests) in enumerate(zip(functions, all_inputs, tests))
    ]
    # the build-time check: every description says what its function does on its test inputs
    bad = [(row["function_id"], why) for row in rows if (why := degenerate(row))]
    if bad:
        raise RuntimeError(f"strings generator made {len(bad)} degenerate function(s), e.g. {bad[0][0]}: {bad[0][1]}")
    return rows
