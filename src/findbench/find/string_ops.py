"""Implementations of the atomic FIND string operations (FIND §2.2, appendix F).

Every operation is a module-level function ``op(s, **params) -> str`` using only builtins and
the helpers here, so :mod:`findbench.find.strings` copies its source into a row's ``code``.
Conventions: "letter" is ASCII ``a``-``z`` / ``A``-``Z``, vowels ``aeiouAEIOU``; positions are
0-based, the middle index is ``len(s) // 2``; counts are lowercase English number words; a shift
wraps around the alphabet and keeps case; every operation accepts the empty string.
"""

from __future__ import annotations


def number_to_words(n):
    """Lowercase English words for an integer, e.g. 0 -> 'zero', 21 -> 'twenty-one',
    105 -> 'one hundred five', 2001 -> 'two thousand one', -3 -> 'minus three'."""
    ones = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
            "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
            "seventeen", "eighteen", "nineteen")
    tens = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
    if n < 0:
        return "minus " + number_to_words(-n)
    if n < 20:
        return ones[n]
    if n < 100:
        return tens[n // 10] + ("" if n % 10 == 0 else "-" + ones[n % 10])
    if n < 1000:
        rest = n % 100
        return ones[n // 100] + " hundred" + ("" if rest == 0 else " " + number_to_words(rest))
    if n < 1000000:
        rest = n % 1000
        return number_to_words(n // 1000) + " thousand" + ("" if rest == 0 else " " + number_to_words(rest))
    rest = n % 1000000
    return number_to_words(n // 1000000) + " million" + ("" if rest == 0 else " " + number_to_words(rest))


def shift_letter(ch, shift):
    """Shift an ASCII letter ``shift`` places through the alphabet (wrapping, keeping case);
    any other character is returned unchanged."""
    if "a" <= ch <= "z":
        return chr((ord(ch) - ord("a") + shift) % 26 + ord("a"))
    if "A" <= ch <= "Z":
        return chr((ord(ch) - ord("A") + shift) % 26 + ord("A"))
    return ch


def letter_order(ch):
    """Alphabet position of an ASCII letter (a/A -> 1 ... z/Z -> 26); 0 for anything else."""
    if "a" <= ch <= "z":
        return ord(ch) - ord("a") + 1
    if "A" <= ch <= "Z":
        return ord(ch) - ord("A") + 1
    return 0


def map_words(s, transform):
    """Apply ``transform(index, word)`` to each maximal run of non-whitespace characters,
    leaving every whitespace character where it is."""
    out = []
    i = 0
    k = 0
    while i < len(s):
        if s[i].isspace():
            out.append(s[i])
            i += 1
        else:
            j = i
            while j < len(s) and not s[j].isspace():
                j += 1
            out.append(transform(k, s[i:j]))
            k += 1
            i = j
    return "".join(out)


def uppercase(s):
    return s.upper()


def lowercase(s):
    return s.lower()


def swapcase(s):
    return s.swapcase()


def capitalize_first(s):
    return s[:1].upper() + s[1:].lower()


def title_case(s):
    out = []
    previous = " "
    for ch in s:
        out.append(ch.upper() if previous.isspace() else ch.lower())
        previous = ch
    return "".join(out)


def alternate_case(s):
    return "".join(ch.upper() if i % 2 == 0 else ch.lower() for i, ch in enumerate(s))


def uppercase_vowels(s):
    return "".join(ch.upper() if ch in "aeiou" else ch for ch in s)


def reverse(s):
    return s[::-1]


def reverse_words(s):
    words = s.split()
    return map_words(s, lambda k, word: words[len(words) - 1 - k])


def reverse_each_word(s):
    return map_words(s, lambda k, word: word[::-1])


def reverse_first_half(s):
    half = len(s) // 2
    return s[:half][::-1] + s[half:]


def reverse_second_half(s):
    half = len(s) // 2
    return s[:half] + s[half:][::-1]


def swap_halves(s):
    half = len(s) // 2
    return s[half:] + s[:half]


def reverse_vowels(s):
    vowels = [ch for ch in s if ch in "aeiouAEIOU"]
    out = []
    for ch in s:
        out.append(vowels.pop() if ch in "aeiouAEIOU" else ch)
    return "".join(out)


def extract_digits(s):
    return "".join(ch for ch in s if ch in "0123456789")


def extract_letters(s):
    return "".join(ch for ch in s if letter_order(ch) > 0)


def remove_digits(s):
    return "".join(ch for ch in s if ch not in "0123456789")


def remove_vowels(s):
    return "".join(ch for ch in s if ch not in "aeiouAEIOU")


def remove_duplicate_chars(s):
    seen = set()
    out = []
    for ch in s:
        if ch not in seen:
            seen.add(ch)
            out.append(ch)
    return "".join(out)


def digits_to_words(s):
    return "".join(number_to_words(int(ch)) if ch in "0123456789" else ch for ch in s)


def length_word(s):
    return number_to_words(len(s))


def count_vowels_word(s):
    return number_to_words(sum(1 for ch in s if ch in "aeiouAEIOU"))


def count_consonants_word(s):
    return number_to_words(sum(1 for ch in s if letter_order(ch) > 0 and ch not in "aeiouAEIOU"))


def count_digits_word(s):
    return number_to_words(sum(1 for ch in s if ch in "0123456789"))


def count_words_word(s):
    return number_to_words(len(s.split()))


def count_uppercase_word(s):
    return number_to_words(sum(1 for ch in s if "A" <= ch <= "Z"))


def count_char_word(s, char):
    return number_to_words(s.count(char))


def count_substring_word(s, sub):
    return number_to_words(s.count(sub))


def find_substring_word(s, sub):
    index = s.find(sub)
    return "none" if index < 0 else number_to_words(index)


def first_char(s):
    return s[:1]


def middle_char(s):
    return s[len(s) // 2] if s else ""


def last_char(s):
    return s[-1:]


def char_at_index(s, index):
    return s[index] if index < len(s) else ""


def first_char_order(s):
    order = letter_order(s[0]) if s else 0
    return number_to_words(order) if order else "none"


def middle_char_order(s):
    order = letter_order(s[len(s) // 2]) if s else 0
    return number_to_words(order) if order else "none"


def last_char_order(s):
    order = letter_order(s[-1]) if s else 0
    return number_to_words(order) if order else "none"


def strip_whitespace(s):
    return s.strip()


def strip_left(s):
    return s.lstrip()


def strip_right(s):
    return s.rstrip()


def remove_whitespace(s):
    return "".join(ch for ch in s if not ch.isspace())


def collapse_whitespace(s):
    out = []
    for ch in s:
        if ch.isspace():
            if not out or out[-1] != " ":
                out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def replace_vowels(s, char):
    return "".join(char if ch in "aeiouAEIOU" else ch for ch in s)


def replace_char(s, old, new):
    return s.replace(old, new)


def replace_substring(s, old, new):
    return s.replace(old, new)


def replace_spaces(s, char):
    return s.replace(" ", char)


def remove_char(s, char):
    return s.replace(char, "")


def remove_substring(s, sub):
    return s.replace(sub, "")


def caesar_shift(s, shift):
    return "".join(shift_letter(ch, shift) for ch in s)


def caesar_shift_by_length(s):
    return "".join(shift_letter(ch, len(s)) for ch in s)


def caesar_shift_by_char_order(s, index, direction):
    shift = letter_order(s[index]) * direction if index < len(s) else 0
    return "".join(shift_letter(ch, shift) for ch in s)


def shift_middle_char(s, shift):
    if not s:
        return s
    middle = len(s) // 2
    return s[:middle] + shift_letter(s[middle], shift) + s[middle + 1:]


def shift_first_char(s, shift):
    return shift_letter(s[0], shift) + s[1:] if s else s


def shift_last_char(s, shift):
    return s[:-1] + shift_letter(s[-1], shift) if s else s


def atbash(s):
    out = []
    for ch in s:
        if "a" <= ch <= "z":
            out.append(chr(ord("z") - (ord(ch) - ord("a"))))
        elif "A" <= ch <= "Z":
            out.append(chr(ord("Z") - (ord(ch) - ord("A"))))
        else:
            out.append(ch)
    return "".join(out)


def letter_permutation(s, mapping):
    out = []
    for ch in s:
        if ch in mapping:
            out.append(mapping[ch])
        elif ch.lower() in mapping and "A" <= ch <= "Z":
            out.append(mapping[ch.lower()].upper())
        else:
            out.append(ch)
    return "".join(out)


def insert_at_middle(s, text):
    middle = len(s) // 2
    return s[:middle] + text + s[middle:]


def insert_at_index(s, index, text):
    return s[:index] + text + s[index:]


def append_if_missing(s, char):
    return s if char in s else s + char


def append_text(s, text):
    return s + text


def prepend_text(s, text):
    return text + s


def insert_separator(s, sep):
    return sep.join(s)


def concat_reverse(s):
    return s + s[::-1]


def split_keep_first(s, char):
    return s.split(char)[0]


def split_keep_last(s, char):
    return s.split(char)[-1]


def split_reverse_pieces(s, char):
    return char.join(s.split(char)[::-1])


def duplicate_first_char(s):
    return s[:1] + s


def duplicate_middle_char(s):
    if not s:
        return s
    middle = len(s) // 2
    return s[:middle] + s[middle] + s[middle:]


def duplicate_last_char(s):
    return s + s[-1:]


def duplicate_each_char(s):
    return "".join(ch + ch for ch in s)


def swap_first_last(s):
    if len(s) < 2:
        return s
    return s[-1] + s[1:-1] + s[0]


def swap_indices(s, i, j):
    if j >= len(s):
        return s
    chars = list(s)
    chars[i], chars[j] = chars[j], chars[i]
    return "".join(chars)


def swap_adjacent_pairs(s):
    chars = list(s)
    for i in range(0, len(chars) - 1, 2):
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def rotate_left(s, k):
    if not s:
        return s
    k = k % len(s)
    return s[k:] + s[:k]
