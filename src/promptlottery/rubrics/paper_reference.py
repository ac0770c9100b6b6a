"""The rubric paper's printed numbers and marks, set beside ours in the tables of the same number.

Huynh et al., "Quantifying the Statistical Effect of Rubric Modifications on Human-Autorater
Agreement" (arXiv 2605.06283). Kendall's tau of gpt-4o-2024-11-20 ("GPT-4o") and
Llama-3.1-70B-Instruct ("Llama") against humans (Tables 1, 2, 4), between rubrics (Tables 1, 2)
and between the two models (Table 3); Tables 6 and 7 are given only in the text of §A.2 / §5.3
(GPT-4o; "Llama ratings mirror these patterns"), so only those numbers are here.

Keys: ``(table, dataset, section, row, column)`` -> ``{model: (tau, marks)}``; ``dataset`` is the
essay prompt ("1", "4", "6") or "IF"; ``row`` the paper's abbreviation ("H." = the holistic
score; Ide./Or./WC/SF/Cv. for prompt 1, Ct./PA/La./Na. for prompts 4 and 6); ``column`` the
condition ("Full", "3ex", "0ex", "Sep.", "Bat.", "Edited") or "H_H->H_A" (human vs human).
Marks as the captions define them (``MARKS``). Transcribed by hand from the paper's tables.
"""

from __future__ import annotations

GPT, LLAMA = "GPT-4o", "Llama"
MODELS = (GPT, LLAMA)

#: the marks and their meanings, from the captions of Tables 1, 4, 6 and 7
MARKS = {
    "†": "(Tables 1, 2, 4) significantly larger within holistic prompts (Full vs 3ex, 0ex vs 3ex); "
    "(Table 6) the tau on that subset is significantly larger than on the other subset",
    "⋆": "significantly larger between the separate and batch prompts",
    "s / b ↑ ↓": "in the Edited column: significantly different from the separate (s) / batch (b) "
    "prompt's tau, larger (↑) or smaller (↓)",
    "p / f ↑ ↓": "(Table 7) in the full-agreement row: significantly different from the partial (p) / "
    "full-disagreement (f) subset, larger (↑) or smaller (↓)",
}

#: the paper's abbreviation of each ASAP++ trait ("ideas" is the ASAP++ Content trait of prompt 1)
ABBREV = {
    1: {
        "Content": "Ide.",
        "Organization": "Or.",
        "Word Choice": "WC",
        "Sentence Fluency": "SF",
        "Conventions": "Cv.",
    },
    4: {"Content": "Ct.", "Prompt Adherence": "PA", "Language": "La.", "Narrativity": "Na."},
    6: {"Content": "Ct.", "Prompt Adherence": "PA", "Language": "La.", "Narrativity": "Na."},
}
HOLISTIC_ROW = "H."
HUMAN_COLUMN = "H_H->H_A"

_ANALYTIC = ("Sep.", "Bat.", "Edited")


def _rows(table: str, dataset: str, section: str, cols: tuple[str, ...], rows: dict) -> dict:
    """``rows`` = {row: (gpt values, llama values)}, each a tuple aligned with ``cols`` (None = "-")."""
    out = {}
    for row, per_model in rows.items():
        for model, values in zip(MODELS, per_model):
            for col, v in zip(cols, values):
                if v is None:
                    continue
                tau, marks = (v, "") if isinstance(v, float) else v
                out.setdefault((table, dataset, section, row, col), {})[model] = (tau, marks)
    return out


def _build() -> dict:
    ref: dict = {}
    # ---- Table 1, Delta rater: (Full, 3ex) on H., (Sep., Bat., Edited) on the traits
    rater = {
        "1": {
            "H.": (((0.437, "†"), 0.387), (0.576, 0.571)),
            "Ide.": (((0.474, "⋆"), 0.464, (0.552, "s,b↑")), (0.552, 0.559, 0.552)),
            "Or.": (((0.497, "⋆"), 0.448, (0.544, "s,b↑")), ((0.547, "⋆"), 0.524, (0.529, "s↓"))),
            "WC": (((0.452, "⋆"), 0.439, (0.554, "s,b↑")), ((0.547, "⋆"), 0.527, (0.507, "s↓"))),
            "SF": ((0.459, 0.455, (0.553, "s,b↑")), ((0.559, "⋆"), 0.512, (0.523, "s↓"))),
            "Cv.": ((0.362, (0.388, "⋆"), (0.472, "s,b↑")), (0.491, 0.477, 0.487)),
        },
        "4": {
            "H.": (((0.695, "†"), 0.687), (0.700, 0.699)),
            "Ct.": ((0.673, (0.696, "⋆"), (0.698, "s↑")), ((0.698, "⋆"), 0.693, 0.701)),
            "PA": ((0.662, (0.677, "⋆"), (0.680, "s↑")), ((0.683, "⋆"), 0.665, (0.682, "b↑"))),
            "La.": (((0.627, "⋆"), 0.595, (0.639, "s,b↑")), ((0.630, "⋆"), 0.573, (0.621, "b↑"))),
            "Na.": (((0.669, "⋆"), 0.652, (0.682, "s,b↑")), ((0.674, "⋆"), 0.642, (0.669, "b↑"))),
        },
        "6": {
            "H.": ((0.629, (0.644, "†")), (0.666, (0.680, "†"))),
            "Ct.": ((0.610, (0.652, "⋆"), (0.676, "s,b↑")), ((0.680, "⋆"), 0.648, (0.694, "s,b↑"))),
            "PA": ((0.605, 0.608, (0.666, "s,b↑")), ((0.652, "⋆"), 0.601, (0.668, "s,b↑"))),
            "La.": (((0.524, "⋆"), 0.510, (0.546, "s,b↑")), ((0.542, "⋆"), 0.496, (0.547, "b↑"))),
            "Na.": ((0.562, 0.557, (0.590, "s,b↑")), ((0.579, "⋆"), 0.547, (0.589, "b↑"))),
        },
    }
    for ds, rows in rater.items():
        ref.update(_rows("table1", ds, "Delta rater", ("Full", "3ex"), {"H.": rows["H."]}))
        ref.update(
            _rows("table1", ds, "Delta rater", _ANALYTIC, {k: v for k, v in rows.items() if k != "H."})
        )
    # ---- Table 1, Delta rubric: rows full / 3ex = the holistic condition; H_H->H_A on the full row
    rubric = {
        "1": (
            0.591,
            {
                "Full": ((0.756, 0.750, (0.839, "s,b↑")), ((0.685, "⋆"), 0.671, (0.711, "s,b↑"))),
                "3ex": ((0.792, 0.789, (0.838, "s,b↑")), ((0.736, "⋆"), 0.713, (0.768, "s,b↑"))),
            },
        ),
        "4": (
            0.656,
            {
                "Full": (((0.838, "⋆"), 0.817, (0.876, "s,b↑")), ((0.854, "⋆"), 0.780, (0.869, "s,b↑"))),
                "3ex": (((0.847, "⋆"), 0.823, (0.880, "s,b↑")), ((0.861, "⋆"), 0.784, (0.877, "s,b↑"))),
            },
        ),
        "6": (
            0.681,
            {
                "Full": (((0.781, "⋆"), 0.773, (0.842, "s,b↑")), ((0.803, "⋆"), 0.748, (0.864, "s,b↑"))),
                "3ex": ((0.804, 0.801, (0.857, "s,b↑")), ((0.813, "⋆"), 0.751, (0.868, "s,b↑"))),
            },
        ),
    }
    for ds, (human, rows) in rubric.items():
        ref[("table1", ds, "Delta rubric", "Full", HUMAN_COLUMN)] = {GPT: (human, "")}
        ref.update(_rows("table1", ds, "Delta rubric", _ANALYTIC, rows))
    # ---- Table 2 (IF): Delta rater one row; Delta rubric rows 0ex / 3ex (the human value differs
    # between the GPT-4o and the Llama halves of the printed table: both kept)
    ref.update(
        _rows(
            "table2",
            "IF",
            "Delta rater",
            ("0ex", "3ex", *_ANALYTIC),
            {
                "IF": (
                    (0.536, 0.585, (0.464, "⋆"), 0.167, (0.471, "b↑")),
                    (0.470, 0.578, (0.445, "⋆"), 0.166, (0.426, "b↑")),
                )
            },
        )
    )
    ref[("table2", "IF", "Delta rubric", "0ex", HUMAN_COLUMN)] = {GPT: (0.534, ""), LLAMA: (0.551, "")}
    ref.update(
        _rows(
            "table2",
            "IF",
            "Delta rubric",
            _ANALYTIC,
            {
                "0ex": (((0.640, "⋆"), 0.455, (0.640, "b↑")), ((0.531, "⋆"), 0.285, (0.551, "b↑"))),
                "3ex": (((0.623, "⋆"), 0.484, (0.617, "b↑")), ((0.566, "⋆"), 0.326, (0.623, "b↑"))),
            },
        )
    )
    # ---- Table 3: GPT-4o vs Llama (no marks); IF from §A.1's text
    between = {
        "1": {
            "H.": (0.639, 0.623),
            "Ide.": (0.647, 0.652, 0.660),
            "Or.": (0.675, 0.626, 0.672),
            "WC": (0.616, 0.580, 0.639),
            "SF": (0.608, 0.586, 0.632),
            "Cv.": (0.580, 0.559, 0.610),
        },
        "4": {
            "H.": (0.825, 0.812),
            "Ct.": (0.777, 0.815, 0.801),
            "PA": (0.767, 0.773, 0.784),
            "La.": (0.755, 0.711, 0.766),
            "Na.": (0.767, 0.747, 0.789),
        },
        "6": {
            "H.": (0.790, 0.782),
            "Ct.": (0.716, 0.779, 0.772),
            "PA": (0.712, 0.746, 0.780),
            "La.": (0.745, 0.705, 0.753),
            "Na.": (0.749, 0.709, 0.772),
        },
    }
    for ds, rows in between.items():
        for row, values in rows.items():
            cols = ("Full", "3ex") if row == "H." else _ANALYTIC
            for col, v in zip(cols, values):
                ref[("table3", ds, "GPT-4o vs Llama", row, col)] = {f"{GPT} vs {LLAMA}": (v, "")}
    for col, v in zip(("0ex", "3ex", *_ANALYTIC), (0.752, 0.724, 0.674, 0.193, 0.662)):
        ref[("table3", "IF", "GPT-4o vs Llama", "IF", col)] = {f"{GPT} vs {LLAMA}": (v, "")}
    # ---- Table 4: Delta rater + rubric. LLM_H->H_A under (Full, 3ex) / (0ex, 3ex); H_H->LLM_A under Sep./Bat./Edited
    plus = {
        "1": (((0.574, "†"), 0.539, 0.279, 0.271, (0.401, "s,b↑")), (0.601, 0.605, 0.467, 0.467, 0.470)),
        "4": (
            (0.691, 0.688, 0.669, 0.668, (0.682, "s,b↑")),
            (0.674, 0.674, (0.710, "⋆"), 0.674, (0.707, "b↑")),
        ),
        "6": (
            (0.645, (0.653, "†"), 0.585, (0.595, "⋆"), (0.644, "s,b↑")),
            (0.660, (0.670, "†"), (0.637, "⋆"), 0.592, (0.671, "s,b↑")),
        ),
        "IF": (
            (0.541, 0.530, (0.474, "⋆"), 0.34, (0.459, "b↑")),
            (0.478, 0.545, (0.421, "⋆"), 0.183, (0.424, "b↑")),
        ),
    }
    for ds, per_model in plus.items():
        holistic = ("0ex", "3ex") if ds == "IF" else ("Full", "3ex")
        cols = tuple(f"LLM_H->H_A {c}" for c in holistic) + tuple(f"H_H->LLM_A {c}" for c in _ANALYTIC)
        ref.update(_rows("table4", ds, "Delta rater+rubric", cols, {ds: per_model}))
    # ---- Table 6 (§A.2 text, GPT-4o): raters agree vs disagree, holistic Full / 3ex; "a significant
    # difference in essay prompt 4" (the agree subset larger)
    agree = {
        "1": ((0.450, 0.454), (0.398, 0.413), ""),
        "4": ((0.687, 0.525), (0.678, 0.512), "†"),
        "6": ((0.659, 0.642), (0.675, 0.653), ""),
    }
    for ds, (full, three, mark) in agree.items():
        for col, (a, d) in (("Full", full), ("3ex", three)):
            ref[("table6", ds, "raters agree vs disagree", "agree", col)] = {GPT: (a, mark)}
            ref[("table6", ds, "raters agree vs disagree", "disagree", col)] = {GPT: (d, "")}
    # ---- Table 7 (§5.3 / §A.2 text, GPT-4o): IF full / partial / no agreement. Holistic: the full
    # row significantly above both others "under all conditions"; analytic (two strata only): above
    # partial for separate and edited, not significantly for batch
    levels = {
        "0ex": (0.792, 0.559, 0.220, "p,f↑"),
        "3ex": (0.803, 0.584, 0.268, "p,f↑"),
        "Sep.": (0.299, 0.251, None, "p↑"),
        "Bat.": (0.078, 0.028, None, ""),
        "Edited": (0.31, 0.261, None, "p↑"),
    }
    for col, (full, partial, none, mark) in levels.items():
        ref[("table7", "IF", "human agreement", "full", col)] = {GPT: (full, mark)}
        ref[("table7", "IF", "human agreement", "partial", col)] = {GPT: (partial, "")}
        if none is not None:
            ref[("table7", "IF", "human agreement", "none", col)] = {GPT: (none, "")}
    return ref


#: every printed number: (table, dataset, section, row, column) -> {model: (tau, marks)}
PAPER = _build()

#: the shares of the strata the paper reports (§A.2, §5.3)
STRATA_SHARES = {
    "1": {"agree": 0.653},
    "4": {"agree": 0.771},
    "6": {"agree": 0.622},
    "IF": {"full": 0.259, "partial": 0.533, "none": 0.209},
}


def paper_value(
    table: str, dataset: str, section: str, row: str, column: str
) -> dict[str, tuple[float, str]]:
    """The paper's values of one cell, by model ({} where the paper prints none)."""
    return dict(PAPER.get((table, dataset, section, row, column), {}))
