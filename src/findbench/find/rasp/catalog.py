"""The ``rasp`` config's programs: three tiers (``subcategory``), all seeded.

- ``library``: tracr's example programs (length, histogram, sorting, reversal, Dyck balance, …)
  written here as specs from their documented behaviour, with written descriptions;
- ``family``: FIND-style families × 10 seeded instances, descriptions from templates;
- ``sampled``: random programs of 3-8 operations over the registry, rejected when undefined,
  constant, the identity or equal on the probe set to an earlier program; described op by op.

Every program comes with its ``domain`` (vocabulary, lengths, BOS, preconditions, tolerance).
"""

from __future__ import annotations

import json

import numpy as np

from findbench.find.rasp import programs as P

BOS = "BOS"
#: Numerical outputs match within this absolute tolerance.
TOLERANCE = 1e-3
N_FAMILY_INSTANCES = 10
N_SAMPLED = 195
N_PROBES = 200


class Builder:
    """Appends ops to a program and returns each new variable's name."""

    def __init__(self):
        self.ops: list[dict] = []

    def _add(self, op: dict) -> str:
        op["name"] = f"v{len(self.ops) + 1}"
        self.ops.append(op)
        return op["name"]

    def map(self, fn, x, *args, enc="categorical"):
        return self._add({"op": "map", "fn": fn, "args": list(args), "x": x, "enc": enc})

    def seq(self, fn, x, y, *args):
        return self._add({"op": "sequence_map", "fn": fn, "args": list(args), "x": x, "y": y, "enc": "categorical"})

    def lin(self, x, y, a, b):
        return self._add({"op": "linear_sequence_map", "x": x, "y": y, "a": a, "b": b, "enc": "numerical"})

    def select(self, keys, queries, pred, *args):
        return self._add({"op": "select", "keys": keys, "queries": queries, "pred": pred, "args": list(args)})

    def agg(self, sel, x, enc="categorical"):
        return self._add({"op": "aggregate", "sel": sel, "x": x, "enc": enc})

    def width(self, sel):
        return self._add({"op": "selector_width", "sel": sel})

    def program(self, output: str | None = None) -> dict:
        return {"ops": self.ops, "output": output or self.ops[-1]["name"]}


def domain(vocab, max_len, *, min_len=1, preconditions=()) -> dict:
    return {"vocab": list(vocab), "min_len": min_len, "max_len": max_len, "bos": BOS,
            "preconditions": list(preconditions), "tolerance": TOLERANCE}


def _item(name, family, program, dom, description):
    return {"name": name, "family": family, "program": program, "domain": dom, "description": description}


# ---------------------------------------------------------------- library (tracr's examples)

def _length(b):
    return b.width(b.select("tokens", "tokens", "TRUE"))


def _frac_prevs(b, c):
    return b.agg(b.select("indices", "indices", "LEQ"), b.map("eq", "tokens", c, enc="numerical"), enc="numerical")


def _sort_unique(b, keys, vals):
    target = b.width(b.select(keys, keys, "LT"))
    return b.agg(b.select(target, "indices", "EQ"), vals)


def _balance(b, open_, close):
    prefix = b.select("indices", "indices", "LEQ")
    opens = b.agg(prefix, b.map("eq", "tokens", open_, enc="numerical"), enc="numerical")
    closes = b.agg(prefix, b.map("eq", "tokens", close, enc="numerical"), enc="numerical")
    return b.lin(opens, closes, 1, -1)


def library() -> list[dict]:
    out = []

    def add(name, family, build, dom, description):
        b = Builder()
        build(b)
        out.append(_item(name, family, b.program(), dom, description))

    add("length", "length", _length, domain(range(4), 8), "The length of the input, at every position.")
    add("hist", "histogram", lambda b: b.width(b.select("tokens", "tokens", "EQ")), domain(range(4), 8),
        "How many times the token at each position occurs in the whole input.")
    for c in (0, 2):
        add(f"frac_prevs_{c}", "frac_prevs", lambda b, c=c: _frac_prevs(b, c), domain(range(4), 8),
            f"The fraction of the tokens up to and including each position that are {c}.")

    def reverse(b):
        opp = b.seq("sub_mod", _length(b), "indices", 64)
        opp = b.map("add_mod", opp, -1, 64)
        b.agg(b.select("indices", opp, "EQ"), "tokens")

    add("reverse", "reverse", reverse, domain(range(4), 6), "The input reversed.")
    add("sort_unique", "sort", lambda b: _sort_unique(b, "tokens", "tokens"),
        domain(range(6), 6, preconditions=["distinct"]), "The input sorted in increasing order (tokens are distinct).")

    def sort(b):
        keys = b.seq("key_index", "tokens", "indices", 8)
        _sort_unique(b, keys, "tokens")

    add("sort", "sort", sort, domain(range(4), 6), "The input sorted in increasing order, ties kept in input order.")

    def sort_freq(b):
        hist = b.map("affine", b.width(b.select("tokens", "tokens", "EQ")), -1, 6)
        _sort_unique(b, b.seq("key_index", hist, "indices", 8), "tokens")

    add("sort_freq", "sort", sort_freq, domain(range(3), 5),
        "The input's tokens ordered by decreasing frequency in the input, ties kept in input order.")
    add("pair_balance", "balance", lambda b: _balance(b, 0, 1), domain(range(3), 8),
        "Opening minus closing brackets among the tokens up to each position, where 0 opens and 1 closes.")

    def dyck1(b):
        bal = _balance(b, 0, 1)
        neg = b.map("is_neg", bal, enc="numerical")
        any_neg = b.agg(b.select("indices", "indices", "LEQ"), neg, enc="numerical")
        ok_so_far = b.map("is_zero", any_neg)
        b.seq("and", ok_so_far, b.map("is_zero", bal))

    add("shuffle_dyck", "balance", dyck1, domain(range(2), 6),
        "1 where the prefix up to that position is balanced (0 opens, 1 closes) and never closed more than it "
        "opened, else 0.")

    def dyck2(b):
        ok = []
        for open_, close in ((0, 1), (2, 3)):
            bal = _balance(b, open_, close)
            any_neg = b.agg(b.select("indices", "indices", "LEQ"), b.map("is_neg", bal, enc="numerical"),
                            enc="numerical")
            ok.append(b.seq("and", b.map("is_zero", any_neg), b.map("is_zero", bal)))
        b.seq("and", *ok)

    add("shuffle_dyck2", "balance", dyck2, domain(range(4), 5),
        "1 where the prefix is balanced for both bracket pairs (0/1 and 2/3, shuffled together) and never closed "
        "more than it opened, else 0.")
    for d in (1, 2):
        add(f"shift_by_{d}", "shift", lambda b, d=d: b.agg(b.select("indices", "indices", "offset_clamp", d), "tokens"),
            domain(range(4), 6),
            f"The token {d} position(s) earlier; the first {d} position(s) repeat the first token.")

    def detect(b, pattern):
        n = len(pattern)
        hits = []
        for back, tok in enumerate(reversed(pattern)):
            cur = "tokens" if back == 0 else b.agg(b.select("indices", "indices", "offset_clamp", back), "tokens")
            hits.append(b.map("eq", cur, tok))
        acc = hits[0]
        for h in hits[1:]:
            acc = b.seq("and", acc, h)
        clamp = b.map("lt", "indices", n - 1)
        b.seq("gt", acc, clamp)

    for pattern in ((0, 1), (1, 0, 2)):
        add(f"detect_pattern_{''.join(map(str, pattern))}", "detect_pattern",
            lambda b, p=pattern: detect(b, p), domain(range(3), 6),
            f"1 where the input ends at that position with the pattern {list(pattern)}, else 0.")

    def count_less_freq(b, n):
        hist = b.width(b.select("tokens", "tokens", "EQ"))
        rare = b.map("lt", hist, n + 1)
        b.width(b.select(rare, rare, "key_is", 1))

    for n in (1, 2):
        add(f"count_less_freq_{n}", "count_less_freq", lambda b, n=n: count_less_freq(b, n), domain(range(4), 6),
            f"How many positions hold a token that occurs at most {n} time(s) in the input.")
    for c in (1, 3):
        add(f"count_{c}", "count", lambda b, c=c: b.width(b.select("tokens", "tokens", "key_is", c)),
            domain(range(4), 8), f"How many tokens of the input are {c}, at every position.")
    add("mean_is_0", "frac", lambda b: b.agg(b.select("tokens", "tokens", "TRUE"),
                                             b.map("eq", "tokens", 0, enc="numerical"), enc="numerical"),
        domain(range(3), 8), "The fraction of the input's tokens that are 0, at every position.")
    add("nary_sum", "sequence_map", lambda b: b.seq("add_mod", b.seq("add_mod", "tokens", "indices", 5),
                                                    b.map("parity", "tokens"), 5),
        domain(range(5), 6), "(token + position + token mod 2) mod 5 at each position.")
    return out


# ---------------------------------------------------------------- families

def _pred_map(rng, vocab):
    kind = ["eq", "lt", "gt", "parity"][rng.integers(4)]
    if kind == "parity":
        return kind, (), "odd"
    c = int(vocab[rng.integers(1, len(vocab) - 1)])
    return kind, (c,), {"eq": f"equal to {c}", "lt": f"below {c}", "gt": f"above {c}"}[kind]


def _family_frac_prev(rng, vocab, max_len):
    fn, args, phrase = _pred_map(rng, vocab)
    b = Builder()
    b.agg(b.select("indices", "indices", "LEQ"), b.map(fn, "tokens", *args, enc="numerical"), enc="numerical")
    text = f"The fraction of the tokens up to and including each position that are {phrase}."
    return b.program(), domain(vocab, max_len), text


def _family_shift(rng, vocab, max_len):
    d = int(rng.integers(1, 4))
    b = Builder()
    b.agg(b.select("indices", "indices", "offset_clamp", d), "tokens")
    return (b.program(), domain(vocab, max_len),
            f"The token {d} position(s) earlier; the first {d} position(s) repeat the first token.")


def _family_table(rng, vocab, max_len):
    table = [int(x) for x in rng.integers(0, len(vocab), len(vocab))]
    while len(set(table)) < 2:
        table = [int(x) for x in rng.integers(0, len(vocab), len(vocab))]
    b = Builder()
    b.map("table", "tokens", table)
    pairs = ", ".join(f"{v}→{t}" for v, t in zip(vocab, table))
    return b.program(), domain(vocab, max_len), f"Each token mapped by the table {pairs}."


def _family_count(rng, vocab, max_len):
    c = int(vocab[rng.integers(len(vocab))])
    b = Builder()
    b.width(b.select("tokens", "tokens", "key_is", c))
    return b.program(), domain(vocab, max_len), f"How many tokens of the input equal {c}, at every position."


def _family_compare_first(rng, vocab, max_len):
    fn = ["eq", "lt", "gt"][rng.integers(3)]
    b = Builder()
    first = b.agg(b.select("indices", "indices", "key_is", 0), "tokens")
    b.seq(fn, "tokens", first)
    word = {"eq": "equals", "lt": "is below", "gt": "is above"}[fn]
    return b.program(), domain(vocab, max_len), f"1 where the token {word} the first token of the input, else 0."


def _family_sort_key(rng, vocab, max_len):
    table = [int(x) for x in rng.integers(0, len(vocab), len(vocab))]
    b = Builder()
    key = b.seq("key_index", b.map("table", "tokens", table), "indices", max_len)
    _sort_unique(b, key, "tokens")
    pairs = ", ".join(f"{v}→{t}" for v, t in zip(vocab, table))
    return (b.program(), domain(vocab, max_len),
            f"The input's tokens sorted by increasing key ({pairs}), ties kept in input order.")


def _family_hist(rng, vocab, max_len):
    pred = ["EQ", "LT", "LEQ", "GT", "GEQ", "NEQ", "same_parity"][rng.integers(7)]
    b = Builder()
    b.width(b.select("tokens", "tokens", pred))
    words = {"EQ": "equal to", "LT": "below", "LEQ": "at most", "GT": "above", "GEQ": "at least",
             "NEQ": "different from", "same_parity": "of the same parity as"}[pred]
    return b.program(), domain(vocab, max_len), f"How many tokens of the input are {words} the token at each position."


def _family_balance(rng, vocab, max_len):
    open_, close = (int(v) for v in rng.choice(vocab, 2, replace=False))
    b = Builder()
    _balance(b, open_, close)
    return (b.program(), domain(vocab, max_len),
            f"Opening minus closing brackets up to each position, where {open_} opens and {close} closes.")


def _family_pattern(rng, vocab, max_len):
    a, c = (int(v) for v in rng.choice(vocab, 2, replace=False))
    b = Builder()
    prev = b.agg(b.select("indices", "indices", "offset_clamp", 1), "tokens")
    hit = b.seq("and", b.map("eq", prev, a), b.map("eq", "tokens", c))
    b.seq("gt", hit, b.map("lt", "indices", 1))
    return b.program(), domain(vocab, max_len), f"1 where the token is {c} and the previous token is {a}, else 0."


def _family_map_aggregate(rng, vocab, max_len):
    fn, args, phrase = _pred_map(rng, vocab)
    b = Builder()
    b.agg(b.select("tokens", "tokens", "TRUE"), b.map(fn, "tokens", *args, enc="numerical"), enc="numerical")
    text = f"The fraction of the input's tokens that are {phrase}, at every position."
    return b.program(), domain(vocab, max_len), text


def _family_token_index(rng, vocab, max_len):
    m = int(rng.integers(2, 7))
    fn = ["add_mod", "sub_mod"][rng.integers(2)]
    b = Builder()
    b.seq(fn, "tokens", "indices", m)
    sign = "+" if fn == "add_mod" else "-"
    return b.program(), domain(vocab, max_len), f"(token {sign} position) mod {m}, positions counted from 0."


def _family_prev_compare(rng, vocab, max_len):
    fn = ["eq", "lt", "gt"][rng.integers(3)]
    b = Builder()
    prev = b.agg(b.select("indices", "indices", "offset_clamp", 1), "tokens")
    b.seq(fn, "tokens", prev)
    word = {"eq": "equals", "lt": "is below", "gt": "is above"}[fn]
    return (b.program(), domain(vocab, max_len),
            f"1 where the token {word} the previous token (the first token compares with itself), else 0.")


def _family_reverse_map(rng, vocab, max_len):
    k = int(rng.integers(1, len(vocab)))
    b = Builder()
    opp = b.map("add_mod", b.seq("sub_mod", _length(b), "indices", 64), -1, 64)
    b.map("add_mod", b.agg(b.select("indices", opp, "EQ"), "tokens"), k, len(vocab))
    return b.program(), domain(vocab, max_len), f"The input reversed, each token then plus {k} mod {len(vocab)}."


def _family_running_max(rng, vocab, max_len):
    c = int(vocab[rng.integers(1, len(vocab))])
    b = Builder()
    seen = b.agg(b.select("indices", "indices", "LEQ"), b.map("eq", "tokens", c, enc="numerical"), enc="numerical")
    b.map("gt", seen, 0)
    return b.program(), domain(vocab, max_len), f"1 from the first {c} of the input onwards, else 0."


FAMILIES = {
    "frac_prev": _family_frac_prev, "shift": _family_shift, "table_map": _family_table,
    "count_token": _family_count, "compare_first": _family_compare_first, "sort_by_key": _family_sort_key,
    "histogram": _family_hist, "bracket_balance": _family_balance, "detect_pair": _family_pattern,
    "map_aggregate": _family_map_aggregate, "token_index": _family_token_index, "compare_prev": _family_prev_compare,
    "reverse_map": _family_reverse_map, "seen_token": _family_running_max,
}


def families(seed: int, taken: set) -> tuple[list[dict], int]:
    """``N_FAMILY_INSTANCES`` distinct instances per family, and how many draws were rejected
    (undefined on the probes or repeating an earlier output table); ``taken`` is updated."""
    out, rejected = [], 0
    for f_index, (family, make) in enumerate(FAMILIES.items()):
        rng = np.random.default_rng([seed, 1, f_index])
        made = 0
        for _ in range(50 * N_FAMILY_INSTANCES):
            if made == N_FAMILY_INSTANCES:
                break
            vocab = list(range(int(rng.integers(3, 9))))
            program, dom, text = make(rng, vocab, int(rng.integers(5, 9)))
            if not _accept(program, dom, taken):
                rejected += 1
                continue
            out.append(_item(f"{family}_{made}", family, program, dom, text))
            made += 1
    return out, rejected


def _accept(program: dict, dom: dict, taken: set) -> bool:
    table = output_table(program, probes(dom))
    key = (json.dumps(dom), table)
    if table is None or key in taken:
        return False
    taken.add(key)
    return True


# ---------------------------------------------------------------- sampled

def _sample_program(rng, vocab, max_len) -> dict:
    b = Builder()
    cat, num, binary = ["tokens", "indices"], [], []  # tracr averages only 0/1 numerical values
    n_ops = int(rng.integers(3, 9))
    while len(b.ops) < n_ops:
        kind = rng.choice(["map", "map_num", "seq", "lin", "agg_cat", "agg_num", "width"],
                          p=[0.22, 0.14, 0.16, 0.06, 0.14, 0.14, 0.14])
        x = cat[rng.integers(len(cat))]
        if kind == "map":
            fn = rng.choice(["add_mod", "mul_mod", "eq", "lt", "gt", "min_c", "max_c", "parity", "table"])
            c = int(vocab[rng.integers(len(vocab))])
            args = {"add_mod": [int(rng.integers(1, 4)), len(vocab)],
                    "mul_mod": [int(rng.integers(2, 4)), len(vocab)], "parity": [],
                    "table": [[int(t) for t in rng.integers(0, len(vocab), len(vocab))]]}.get(str(fn), [c])
            cat.append(b.map(str(fn), x, *args))
        elif kind == "map_num":
            fn = rng.choice(["eq", "lt", "gt", "parity"])
            args = [] if fn == "parity" else [int(vocab[rng.integers(len(vocab))])]
            num.append(b.map(str(fn), x, *args, enc="numerical"))
            binary.append(num[-1])
        elif kind == "seq":
            fn = str(rng.choice(["add_mod", "sub_mod", "max", "min", "eq", "lt", "gt", "and", "or"]))
            y = cat[rng.integers(len(cat))]
            if y == x:
                continue
            cat.append(b.seq(fn, x, y, *([len(vocab)] if fn.endswith("_mod") else [])))
        elif kind == "lin":
            if len(num) < 2:
                continue
            i, j = rng.choice(len(num), 2, replace=False)
            num.append(b.lin(num[i], num[j], int(rng.choice([1, -1, 2])), int(rng.choice([1, -1]))))
        else:
            pred = str(rng.choice(["EQ", "NEQ", "LT", "LEQ", "GT", "GEQ", "TRUE", "offset_clamp"]))
            keys, queries = (("indices", "indices") if pred == "offset_clamp"
                             else (x, cat[rng.integers(len(cat))]))
            args = [int(rng.integers(1, 3))] if pred == "offset_clamp" else []
            if kind == "agg_num" and not binary:
                continue
            sel = b.select(keys, queries, pred, *args)
            if kind == "width":
                cat.append(b.width(sel))
            elif kind == "agg_num":
                num.append(b.agg(sel, binary[rng.integers(len(binary))], enc="numerical"))
            else:
                cat.append(b.agg(sel, cat[rng.integers(len(cat))]))
    return b.program()


def _renumber(program: dict) -> dict:
    names = {op["name"]: f"v{i + 1}" for i, op in enumerate(program["ops"])}
    ops = [{k: names.get(v, v) if k in ("name", "x", "y", "keys", "queries", "sel") else v for k, v in op.items()}
           for op in program["ops"]]
    return {"ops": ops, "output": names[program["output"]]}


def output_table(program: dict, probes: list[list]) -> tuple | None:
    """The program's outputs on ``probes`` (``None`` when undefined on one); rounded numbers."""
    try:
        return tuple(tuple(round(float(v), 6) if isinstance(v, float) else v for v in P.run(program, p))
                     for p in probes)
    except (P.Undefined, ZeroDivisionError, TypeError, IndexError):
        return None


def probes(dom: dict, seed: int = 0) -> list[list]:
    return P.domain_inputs(dom, N_PROBES, np.random.default_rng([seed, 7]))


def sampled(seed: int, taken: set) -> tuple[list[dict], dict]:
    """``N_SAMPLED`` programs and the count of each rejection reason (``no_tokens``: the program never
    reads the tokens, which tracr cannot compile); ``taken`` holds the output
    tables of earlier programs (updated)."""
    rng = np.random.default_rng([seed, 2])
    out, rejected = [], {"undefined": 0, "constant": 0, "identity": 0, "duplicate": 0, "no_tokens": 0}
    while len(out) < N_SAMPLED:
        vocab = list(range(int(rng.integers(3, 7))))
        dom = domain(vocab, int(rng.integers(5, 8)))
        program = _sample_program(rng, vocab, dom["max_len"])
        used = {program["output"]}
        for op in reversed(program["ops"]):  # keep only ops the output depends on
            if op["name"] in used:
                used |= {op.get(k) for k in ("x", "y", "keys", "queries", "sel")}
        program = _renumber({"ops": [op for op in program["ops"] if op["name"] in used], "output": program["output"]})
        if not 3 <= len(program["ops"]) <= 8:
            continue
        probe = probes(dom)
        table = output_table(program, probe)
        if not any("tokens" in (op.get(k) for k in ("x", "y", "keys", "queries")) for op in program["ops"]):
            rejected["no_tokens"] += 1  # a function of the length alone; tracr needs the tokens
        elif table is None:
            rejected["undefined"] += 1
        elif len({v for row in table for v in row}) < 2:
            rejected["constant"] += 1
        elif all(list(row) == p for row, p in zip(table, probe)):
            rejected["identity"] += 1
        elif (json.dumps(dom), table) in taken:
            rejected["duplicate"] += 1
        else:
            taken.add((json.dumps(dom), table))
            out.append(_item(f"sampled_{len(out)}", "sampled", program, dom, P.describe(program)))
    return out, rejected


def catalog(seed: int = 0) -> tuple[list[dict], dict]:
    """All programs of the config in id order, each with its ``tier``; and the rejections per tier
    (library programs are all kept: a rejection there is a bug)."""
    taken: set = set()
    lib = library()
    assert all(_accept(item["program"], item["domain"], taken) for item in lib), "a library program is undefined"
    fam, fam_rejected = families(seed, taken)
    samples, rejected = sampled(seed, taken)
    items = [{**item, "tier": tier} for tier, part in (("library", lib), ("family", fam), ("sampled", samples))
             for item in part]
    return items, {"family": fam_rejected, "sampled": rejected}
