"""Templated next-token tasks for interchange interventions (Huang et al. 2023, Sec. 5).

Each task tests one *concept* (numbers, verbs, locations, names, time, plurals): a template with
one slot ``{x}`` for a filler and, per filler, the expected continuation. An intervention that
moves the concept from a source input into a base input should make the base predict the
source's answer. Only inputs the model answers correctly are usable (:func:`build_task_rows`).
Numeric templates end with a space: SmolLM2/Llama tokenisers write ``" 21"`` as ``" ", "2",
"1"``, so the expected token is the first digit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from findbench import _checks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InterventionTask:
    """One templated task (``name`` e.g. ``"numbers/unit_conversion"``): a ``template`` with one ``{x}``
    slot, its ``fillers`` and the expected continuation of each (``answers``)."""

    name: str
    concept: str
    template: str
    fillers: tuple[str, ...]
    answers: tuple[str, ...]
    description: str = ""

    def __post_init__(self):
        if "{x}" not in self.template:
            raise ValueError(f"template of task {self.name!r} must contain the slot {{x}}")
        if len(self.fillers) != len(self.answers) or not self.fillers:
            raise ValueError(f"task {self.name!r}: fillers and answers must be non-empty and of equal length")

    def prompt(self, filler: str) -> str:
        return self.template.replace("{x}", filler)


def _task(
    name: str, concept: str, template: str, pairs: Sequence[tuple[str, str]], description: str
) -> InterventionTask:
    return InterventionTask(
        name=name,
        concept=concept,
        template=template,
        fillers=tuple(p[0] for p in pairs),
        answers=tuple(p[1] for p in pairs),
        description=description,
    )


_VERBS_PAST = [
    ("walk", "walked"),
    ("play", "played"),
    ("jump", "jumped"),
    ("cook", "cooked"),
    ("talk", "talked"),
    ("watch", "watched"),
    ("clean", "cleaned"),
    ("open", "opened"),
    ("call", "called"),
    ("help", "helped"),
    ("go", "went"),
    ("eat", "ate"),
    ("see", "saw"),
    ("run", "ran"),
    ("write", "wrote"),
    ("drink", "drank"),
    ("sing", "sang"),
    ("swim", "swam"),
    ("buy", "bought"),
    ("sleep", "slept"),
    ("read", "read"),
    ("make", "made"),
    ("take", "took"),
    ("give", "gave"),
    ("find", "found"),
    ("think", "thought"),
]
_VERBS_TRANSITIVE = [
    ("carry", "Yes"),
    ("build", "Yes"),
    ("hit", "Yes"),
    ("buy", "Yes"),
    ("throw", "Yes"),
    ("push", "Yes"),
    ("destroy", "Yes"),
    ("wash", "Yes"),
    ("kick", "Yes"),
    ("paint", "Yes"),
    ("bring", "Yes"),
    ("hold", "Yes"),
    ("sleep", "No"),
    ("arrive", "No"),
    ("laugh", "No"),
    ("cry", "No"),
    ("sneeze", "No"),
    ("die", "No"),
    ("fall", "No"),
    ("smile", "No"),
    ("yawn", "No"),
    ("wait", "No"),
    ("exist", "No"),
    ("sit", "No"),
]
_CAPITALS = [
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Japan", "Tokyo"),
    ("China", "Beijing"),
    ("Russia", "Moscow"),
    ("Egypt", "Cairo"),
    ("Greece", "Athens"),
    ("England", "London"),
    ("Canada", "Ottawa"),
    ("Australia", "Canberra"),
    ("Portugal", "Lisbon"),
    ("Austria", "Vienna"),
    ("Ireland", "Dublin"),
    ("Norway", "Oslo"),
    ("Sweden", "Stockholm"),
    ("Poland", "Warsaw"),
    ("Hungary", "Budapest"),
    ("Kenya", "Nairobi"),
    ("Peru", "Lima"),
    ("Cuba", "Havana"),
    ("Thailand", "Bangkok"),
    ("India", "New"),
    ("Turkey", "Ankara"),
    ("Mexico", "Mexico"),
    ("Belgium", "Brussels"),
    ("Denmark", "Copenhagen"),
]
_CITIES = [
    ("Paris", "France"),
    ("Berlin", "Germany"),
    ("Rome", "Italy"),
    ("Madrid", "Spain"),
    ("Tokyo", "Japan"),
    ("Beijing", "China"),
    ("Moscow", "Russia"),
    ("Cairo", "Egypt"),
    ("Athens", "Greece"),
    ("London", "England"),
    ("Toronto", "Canada"),
    ("Sydney", "Australia"),
    ("Lisbon", "Portugal"),
    ("Vienna", "Austria"),
    ("Dublin", "Ireland"),
    ("Munich", "Germany"),
    ("Milan", "Italy"),
    ("Barcelona", "Spain"),
    ("Osaka", "Japan"),
    ("Shanghai", "China"),
    ("Chicago", "America"),
    ("Mumbai", "India"),
    ("Istanbul", "Turkey"),
    ("Lyon", "France"),
]
_NAMES = [
    ("John", "he"),
    ("Michael", "he"),
    ("David", "he"),
    ("James", "he"),
    ("Robert", "he"),
    ("Peter", "he"),
    ("Thomas", "he"),
    ("Paul", "he"),
    ("Mark", "he"),
    ("George", "he"),
    ("Daniel", "he"),
    ("Steven", "he"),
    ("Mary", "she"),
    ("Sarah", "she"),
    ("Anna", "she"),
    ("Emily", "she"),
    ("Laura", "she"),
    ("Lisa", "she"),
    ("Jessica", "she"),
    ("Susan", "she"),
    ("Emma", "she"),
    ("Rachel", "she"),
    ("Julia", "she"),
    ("Linda", "she"),
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_NOUNS = [
    ("dog", "dogs"),
    ("cat", "cats"),
    ("book", "books"),
    ("car", "cars"),
    ("chair", "chairs"),
    ("apple", "apples"),
    ("house", "houses"),
    ("bird", "birds"),
    ("table", "tables"),
    ("flower", "flowers"),
    ("bottle", "bottles"),
    ("shoe", "shoes"),
    ("key", "keys"),
    ("box", "boxes"),
    ("cup", "cups"),
    ("phone", "phones"),
]


_LINE = ["John", "Mary", "David", "Sarah", "Peter", "Anna", "Paul", "Lisa"]


#: All tasks, keyed by name.
TASKS: dict[str, InterventionTask] = {
    t.name: t
    for t in [
        _task(
            "numbers/unit_conversion",
            "numbers",
            "1 meter is 100 centimeters, 2 meters is 200 centimeters, {x} meters is ",
            [(str(n), f"{n}00") for n in range(1, 10)],
            "meters to centimeters (first digit of 100x)",
        ),
        _task(
            "numbers/comparison",
            "numbers",
            "Q: Which number is larger, 2 or 5? A: 5\nQ: Which number is larger, {x}? A: ",
            [(f"{a} or {b}", str(max(a, b))) for a in range(1, 10) for b in range(1, 10) if a != b],
            "the larger of two one-digit numbers",
        ),
        _task(
            "verbs/tense",
            "verbs",
            "Today I jump. Yesterday I jumped. Today I {x}. Yesterday I",
            [(a, " " + b) for a, b in _VERBS_PAST],
            "past tense of the present-tense verb",
        ),
        _task(
            "verbs/transitivity",
            "verbs",
            "Can the verb 'eat' take a direct object? Yes\nCan the verb 'go' take a direct object? No\n"
            "Can the verb '{x}' take a direct object?",
            [(a, " " + b) for a, b in _VERBS_TRANSITIVE],
            "whether the verb is transitive",
        ),
        _task(
            "locations/capital",
            "locations",
            "The capital of Japan is Tokyo. The capital of {x} is",
            [(a, " " + b) for a, b in _CAPITALS],
            "capital city of the country",
        ),
        _task(
            "locations/city",
            "locations",
            "Tokyo is a city in Japan. {x} is a city in",
            [(a, " " + b) for a, b in _CITIES],
            "country of the city",
        ),
        _task(
            "names/pronoun_gender",
            "names",
            "John lost his keys. Mary lost her keys. {x} lost",
            [(a, " his" if g == "he" else " her") for a, g in _NAMES],
            "possessive pronoun agreeing with the name's gender",
        ),
        _task(
            "names/position",
            "names",
            "{x} stood in line. The second person in line was",
            [(f"{a} and {b}", " " + b) for i, a in enumerate(_LINE) for b in _LINE[i + 1 :] + _LINE[:i]],
            "the second name of the pair",
        ),
        _task(
            "time/next_day",
            "time",
            "The day after Sunday is Monday. The day after {x} is",
            [(d, " " + _DAYS[(i + 1) % 7]) for i, d in enumerate(_DAYS)],
            "the day after the given day",
        ),
        _task(
            "plurals/subject_verb",
            "plurals",
            "The {x} in the kitchen",
            [(s, " is") for s, _ in _NOUNS] + [(p, " are") for _, p in _NOUNS],
            "verb number agreeing with the subject",
        ),
        _task(
            "plurals/noun_pronoun",
            "plurals",
            "I found the {x} and I gave",
            [(s, " it") for s, _ in _NOUNS] + [(p, " them") for _, p in _NOUNS],
            "pronoun number agreeing with the noun",
        ),
    ]
}


def get_task(task: str | InterventionTask) -> InterventionTask:
    """A task by name (``ValueError`` listing the names when unknown) or the task itself."""
    return task if isinstance(task, InterventionTask) else TASKS[_checks.one_of("task", task, sorted(TASKS))]


def expected_token_id(tokenizer, prompt: str, answer: str) -> int | None:
    """The first token the answer adds after the prompt's tokens, or ``None`` when the
    prompt's tokenisation is not a prefix of the prompt+answer tokenisation."""
    p = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    full = tokenizer(prompt + answer, add_special_tokens=True)["input_ids"]
    return int(full[len(p)]) if len(full) > len(p) and full[: len(p)] == p else None


def token_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of ``text`` (special tokens added) and each token's character span."""
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    return enc["input_ids"], enc["offset_mapping"]


def overlapping(offsets, start: int, end: int) -> list[int]:
    """Positions of the tokens (character ``offsets``) overlapping characters ``[start, end)``."""
    return [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


def filler_positions(tokenizer, task: InterventionTask, filler: str) -> tuple[list[int], list[int]]:
    """Token ids of the prompt and the indices of the tokens overlapping the filler."""
    start = task.template.index("{x}")
    ids, offsets = token_offsets(tokenizer, task.prompt(filler))
    return list(ids), overlapping(offsets, start, start + len(filler))


def build_task_rows(
    model,
    tokenizer,
    tasks: Sequence[str] | None = None,
    *,
    model_name: str = "",
    batch_size: int = 32,
    progress: bool = False,
) -> list[dict]:
    """One row per (task, filler): prompt, expected next token, the model's greedy next token and whether it is
    correct."""
    from tqdm.auto import tqdm

    names = [get_task(n).name for n in (sorted(TASKS) if tasks is None else tasks)]  # unknown names refused first
    rows: list[dict] = []
    for name in tqdm(names, desc="tasks", disable=not progress):
        task = TASKS[name]
        items = []
        for filler, answer in zip(task.fillers, task.answers):
            exp = expected_token_id(tokenizer, task.prompt(filler), answer)
            if exp is None:
                log.warning("task %s filler %r: answer tokenisation does not extend the prompt; skipped", name, filler)
                continue
            items.append((filler, answer, exp, *filler_positions(tokenizer, task, filler)))  # (..., ids, positions)
        preds = next_token_argmax(model, [it[3] for it in items], batch_size=batch_size)
        rows.extend(
            {
                "task": name,
                "concept": task.concept,
                "template": task.template,
                "filler": filler,
                "prompt": task.prompt(filler),
                "answer": answer,
                "expected_token": tokenizer.decode([exp]),
                "expected_token_id": exp,
                "filler_positions": pos,
                "n_tokens": len(ids),
                "predicted_token": tokenizer.decode([pred]),
                "predicted_token_id": int(pred),
                "correct": bool(pred == exp),
                "model": model_name,
            }
            for (filler, answer, exp, ids, pos), pred in zip(items, preds)
        )
    return rows


def equal_length_batches(token_lists: Sequence[Sequence[int]], batch_size: int):
    """Chunks of at most ``batch_size`` indices of equally long token lists, shortest first (no padding)."""
    by_len: dict[int, list[int]] = {}
    for i, ids in enumerate(token_lists):
        by_len.setdefault(len(ids), []).append(i)
    for _, idxs in sorted(by_len.items()):
        for s in range(0, len(idxs), batch_size):
            yield idxs[s : s + batch_size]


def next_token_argmax(model, token_lists: Sequence[Sequence[int]], *, batch_size: int = 32) -> list[int]:
    """Greedy next token after each token list."""
    import torch

    out: dict[int, int] = {}
    with torch.no_grad():
        for chunk in equal_length_batches(token_lists, batch_size):
            ids = torch.tensor([list(token_lists[i]) for i in chunk], device=model.device)
            out.update(
                zip(chunk, model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1].argmax(-1).tolist())
            )
    return [int(out[i]) for i in range(len(token_lists))]
