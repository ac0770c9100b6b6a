"""ASAP-AES essays (Kaggle/Hewlett 2012, sets 1-8, 12,975 essays) + ASAP++ trait scores (sets 1-6).

``essay_set`` = 1..8 (or ``"all"``). Essays: ``asap/asap_original_by_prompt/essay_set_<n>.tsv``
(quoted TSV, essays may span lines). ``human`` holds per-rater lists (``human_kind="per_rater"``):

- ``holistic``: the domain-1 score of rater 1 and rater 2 on the rater scale (set 1, 2: 1-6;
  3, 4: 0-3; 5, 6: 0-4; set 7: 0-15 and set 8: 0-30, where a rater's score is the composite of
  their trait scores). Set 2's domain 1 is "Writing Applications". The resolved score
  (``domain1_score``: set 1 = sum of the 2 raters, 2-12; set 7 = sum, 0-30; set 8 0-60) and set 8's
  adjudicator score ``rater3_domain1`` (0-60, another scale) are in ``meta``, not in the list.
- set 2 only: ``language_conventions`` (domain 2, raters 1-2, 1-4; resolved ``meta["domain2_score"]``).
- sets 7 and 8: the official per-rater trait scores, set 7 ``ideas, organization, style,
  conventions`` (0-3), set 8 ``ideas_and_content, organization, voice, word_choice,
  sentence_fluency, conventions`` (1-6; the adjudicator's trait scores are appended as a third
  value when present, same scale).
- sets 1-6: ASAP++ traits (Mathias & Bhattacharyya 2018) from
  ``asap/rubrics/asapplusplus_trait_scores/Prompt-<n>.csv``, one annotator, so one-element lists:
  sets 1-2 ``content, organization, word_choice, sentence_fluency, conventions`` (1-6); sets 3-4
  ``content, prompt_adherence, language, narrativity`` (0-3); sets 5-6 the same on 0-4. Essays
  without an ASAP++ row (set 2: 4365) and set 2's essay 4355 (two conflicting ASAP++ rows) have no
  trait labels; ``meta["asap_pp"]`` says why.

Inputs: ``essay`` and ``response`` = the essay, ``prompt`` = the set's writing prompt and
``source`` = the source essay of source-based sets 3-6 ("" otherwise), both read from
``asap/rubrics/readme_full_text/essay_set_<n>_readme.txt`` ("" if that file is absent).
Item id ``asap-<essay_id>``; ``system=None``.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import iter_csv_rows, number, require_file, snake
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

#: per-rater domain-1 range and resolved domain1_score range
HOLISTIC = {1: (1, 6), 2: (1, 6), 3: (0, 3), 4: (0, 3), 5: (0, 4), 6: (0, 4), 7: (0, 15), 8: (0, 30)}
RESOLVED = {1: (2, 12), 2: (1, 6), 3: (0, 3), 4: (0, 3), 5: (0, 4), 6: (0, 4), 7: (0, 30), 8: (0, 60)}
OFFICIAL_TRAITS = {
    7: (("ideas", "organization", "style", "conventions"), (0, 3)),
    8: (
        ("ideas_and_content", "organization", "voice", "word_choice", "sentence_fluency", "conventions"),
        (1, 6),
    ),
}
ASAP_PP = {
    1: (("Content", "Organization", "Word Choice", "Sentence Fluency", "Conventions"), (1, 6)),
    2: (("Content", "Organization", "Word Choice", "Sentence Fluency", "Conventions"), (1, 6)),
    3: (("Content", "Prompt Adherence", "Language", "Narrativity"), (0, 3)),
    4: (("Content", "Prompt Adherence", "Language", "Narrativity"), (0, 3)),
    5: (("Content", "Prompt Adherence", "Language", "Narrativity"), (0, 4)),
    6: (("Content", "Prompt Adherence", "Language", "Narrativity"), (0, 4)),
}
CONFLICT = "conflicting duplicate ASAP++ rows"


def _readme_sections(path: Path) -> tuple[str, str]:
    """(prompt, source essay) from an official ReadMeFirst text; ("", "") if the file is absent."""
    if not path.is_file():
        return "", ""
    lines = path.read_text(encoding="utf-8").splitlines()

    def section(start: str, stop: tuple[str, ...]) -> str:
        if start not in lines:
            return ""
        i = lines.index(start) + 1
        j = i
        while j < len(lines) and not lines[j].startswith(stop):
            j += 1
        return "\n".join(lines[i:j]).strip()

    return section("Prompt", ("Rubric Guidelines",)), section("Source Essay", ("Prompt",))


def _asap_pp(path: Path, essay_set: int) -> dict[str, dict[str, list[float]] | str]:
    names, (lo, hi) = ASAP_PP[essay_set]
    out: dict[str, dict[str, list[float]] | str] = {}
    for where, row in iter_csv_rows(require_file(path, "asap"), "asap"):
        id_col = "EssayID" if "EssayID" in row else "Essay ID"
        if id_col not in row:
            raise DatasetError(f"{where}: no EssayID / Essay ID column")
        eid = row[id_col].strip()
        traits = {}
        for name in names:
            if name not in row:
                raise DatasetError(f"{where}: missing column {name!r}")
            traits[snake(name)] = [number(row[name], where, name, lo, hi)]
        if eid in out and out[eid] != traits:
            out[eid] = CONFLICT
        elif eid not in out:
            out[eid] = traits
    return out


def _load_set(root: Path, essay_set: int) -> list[Item]:
    path = root / "asap_original_by_prompt" / f"essay_set_{essay_set}.tsv"
    prompt, source = _readme_sections(
        root / "rubrics" / "readme_full_text" / f"essay_set_{essay_set}_readme.txt"
    )
    pp = (
        _asap_pp(root / "rubrics" / "asapplusplus_trait_scores" / f"Prompt-{essay_set}.csv", essay_set)
        if essay_set in ASAP_PP
        else {}
    )
    h_lo, h_hi = HOLISTIC[essay_set]
    items = []
    for where, row in iter_csv_rows(require_file(path, "asap"), "asap", delimiter="\t"):

        def val(
            col: str, lo: float, hi: float, *, required: bool = True, where=where, row=row
        ) -> float | None:
            if col not in row:
                raise DatasetError(f"{where}: missing column {col!r}")
            if not row[col].strip():
                if required:
                    raise DatasetError(f"{where}: empty {col}")
                return None
            return number(row[col], where, col, lo, hi)

        eid = row.get("essay_id", "").strip()
        if not eid:
            raise DatasetError(f"{where}: empty essay_id")
        if val("essay_set", 1, 8) != essay_set:
            raise DatasetError(f"{where}: essay_set is {row['essay_set']!r}, expected {essay_set}")
        essay = row.get("essay", "").strip()
        if not essay:
            raise DatasetError(f"{where}: empty essay")
        human: dict[str, list[float]] = {
            "holistic": [val("rater1_domain1", h_lo, h_hi), val("rater2_domain1", h_lo, h_hi)]
        }
        meta = {
            "essay_set": essay_set,
            "essay_id": eid,
            "domain1_score": val("domain1_score", *RESOLVED[essay_set]),
            "row": where,
        }
        if essay_set == 8:
            meta["rater3_domain1"] = val("rater3_domain1", 0, 60, required=False)
        if essay_set == 2:
            human["language_conventions"] = [val("rater1_domain2", 1, 4), val("rater2_domain2", 1, 4)]
            meta["domain2_score"] = val("domain2_score", 1, 4)
        if essay_set in OFFICIAL_TRAITS:
            names, (lo, hi) = OFFICIAL_TRAITS[essay_set]
            for k, name in enumerate(names, start=1):
                scores = [val(f"rater{r}_trait{k}", lo, hi) for r in (1, 2)]
                third = val(f"rater3_trait{k}", lo, hi, required=False)
                human[name] = scores + ([third] if third is not None else [])
        if essay_set in ASAP_PP:
            traits = pp.get(eid)
            if isinstance(traits, dict):
                human.update(traits)
                meta["asap_pp"] = "ok"
            else:
                meta["asap_pp"] = traits or "no ASAP++ row"
        items.append(
            Item(
                id=f"asap-{eid}",
                dataset="asap",
                system=None,
                inputs={"essay": essay, "response": essay, "prompt": prompt, "source": source},
                human=human,
                human_kind="per_rater",
                meta=meta,
            )
        )
    return items


@register_loader("asap")
def load_asap(data_dir: Path, *, essay_set: int | str = 1) -> list[Item]:
    if essay_set == "all":
        sets = list(HOLISTIC)
    else:
        try:
            sets = [int(essay_set)]
        except (TypeError, ValueError):
            sets = []
        if not sets or sets[0] not in HOLISTIC:
            raise DatasetError(f"asap: unknown essay_set {essay_set!r}; valid: 1-8 or 'all'")
    root = Path(data_dir) / "asap"
    return [it for s in sets for it in _load_set(root, s)]
