"""The PromptEval-style wording model: toys whose answers follow from the model's definition by hand."""

from __future__ import annotations

import numpy as np
import pytest

from promptlottery.analysis.budget.wording_model import (
    agreement_quantiles,
    fit_wording_model,
    wording_covariates,
)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_additive_grid_is_recovered_in_its_unseen_cells():
    # y = sigmoid(a_i + b_j) exactly (soft agreement), two cells hidden: with a vanishing penalty the
    # log loss is minimised by the true effects, so the hidden cells are predicted as sigmoid(a_i + b_j)
    a = np.array([-1.0, 0.0, 0.5, 1.5, -0.5, 1.0])
    b = np.array([0.0, 1.0, -1.0, 0.5])
    truth = _sigmoid(a[:, None] + b[None, :])
    y = truth.copy()
    y[0, 1] = y[3, 2] = np.nan
    fit = fit_wording_model(y, rank=0, lam=1e-6)
    assert fit.converged
    assert fit.prob[0, 1] == pytest.approx(truth[0, 1], abs=2e-3)
    assert fit.prob[3, 2] == pytest.approx(truth[3, 2], abs=2e-3)
    # observed cells are kept as observed (PromptEval's get_Y_hat)
    assert fit.filled[1, 1] == truth[1, 1]


def test_a_flip_for_one_kind_of_item_under_one_kind_of_wording_needs_the_interaction():
    # items 0-5 agree under wordings 0-2 and disagree under 3-5; items 6-11 the other way round: every
    # item agrees on half its cells and every wording on half its items, so the additive model's best
    # fit is 1/2 in every cell (a_i = b_j = 0 is its optimum by symmetry); a rank-1 u_i v_j separates them
    y = np.zeros((12, 6))
    y[:6, :3] = 1.0
    y[6:, 3:] = 1.0
    y[0, 0] = np.nan  # truth: 1
    y[11, 0] = np.nan  # truth: 0
    additive = fit_wording_model(y, rank=0, lam=1e-3)
    inter = fit_wording_model(y, rank=1, lam=1e-3, lam_rank=1e-2)
    assert abs(additive.prob[0, 0] - 0.5) < 0.1 and abs(additive.prob[11, 0] - 0.5) < 0.1
    assert inter.prob[0, 0] > 0.9 and inter.prob[11, 0] < 0.1


def test_full_grid_quantiles_are_the_empirical_ones():
    # on a full grid every cell is observed, so each wording's agreement is its column mean:
    # wordings' means 0/4, 1/4, 2/4, 3/4, 4/4 -> quantiles by linear interpolation (numpy's default):
    # 5% -> 0.05 * 4 positions = 0.2 of the step 0.25 -> 0.05; 25% -> 0.25; 50% -> 0.5; 95% -> 0.95
    y = np.array([[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=float)
    out = agreement_quantiles(y, rank=0, n_resamples=20)
    assert out["per_wording"] == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert out["quantiles"] == pytest.approx([0.05, 0.25, 0.5, 0.75, 0.95])
    assert np.all(out["lo"] <= out["quantiles"] + 1e-12) and np.all(out["hi"] >= out["quantiles"] - 1e-12)


def test_covariates_share_strength_between_wordings():
    # wordings 0-2 carry tag t=x and agree on every item, wordings 3-5 tag t=y and never do; wording 5
    # is unseen on all but one item: its one-hot tag puts it with 3-4, so its agreement is near 0
    y = np.zeros((10, 6))
    y[:, :3] = 1.0
    y[1:, 5] = np.nan
    tags = [{"t": "x"}] * 3 + [{"t": "y"}] * 3
    x, what = wording_covariates(["w"] * 6, tags, embedding="none")
    assert "tags one-hot (1 columns)" in what and x.shape == (6, 1)
    fit = fit_wording_model(y, x, lam=0.1)
    assert fit.per_wording[5] < 0.1


def test_words_embedding_is_named_and_needs_no_model():
    x, what = wording_covariates(["rate it", "judge it now", "rate it now please"], embedding="words")
    assert "words embedding" in what and x.shape[0] == 3


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="agreement in"):
        fit_wording_model(np.array([[2.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="rows for"):
        fit_wording_model(np.zeros((3, 2)), np.zeros((3, 1)))


def test_budget_report_rows_for_the_oracle_judge_are_its_known_answer(tmp_path):
    """The oracle answers the human label under every wording: every cell agrees with the humans, so
    every wording's agreement, and every quantile over wordings, is 1 (the observed-cells rows exactly;
    the model's filled grid keeps its judged cells at 1 and predicts the rest near 1)."""
    import pandas as pd

    from promptlottery.stages import run_stage
    from tests.conftest import compose

    fields = [
        "dataset=table", "dataset.path=examples/own_judge/qa_answers.jsonl", "dataset.fields.id=id",
        "dataset.fields.context=question", "dataset.fields.reference=gold", "dataset.fields.response=answer",
        "dataset.fields.system=system", "dataset.fields.human=rating", "dataset.human_range=[1,5]",
        "backbone=fake", "backbone.backend.behaviour=oracle", "judge.group_file=examples/own_judge/correctness.yaml",
    ]  # fmt: skip
    for n, v in enumerate(["P1", "P2", "P3", "P4", "P5"]):
        cfg = compose(["+experiment=own_judge", *fields, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / "sweep" / f"{n}_{v}")["status"] == "ok"
    cfg = compose(
        ["+analysis=budget", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.n_sim=2", "analysis.n_resamples=10",
         "analysis.budgets=[0.5]", "analysis.designs=[items]", "analysis.model_ranks=[0]", "analysis.model_n_sim=2",
         "analysis.model_resamples=3", "analysis.model_embedding=words", "analysis.human_range=[1,5]"],
        tmp_path=tmp_path,
    )  # fmt: skip
    assert run_stage(cfg, tmp_path / "budget")["status"] == "ok"
    table = pd.read_csv(tmp_path / "budget" / "tables" / "wording_model.csv")
    quant = table[table["statistic"].str.startswith("q")]
    assert (quant["full"] == 1.0).all()
    observed = quant[quant["method"].str.startswith("observed")]
    assert (observed["mean_estimate"] == 1.0).all()
    model = quant[quant["method"] == "ours: PromptEval-style model, rank 0"]
    assert len(model) == 5 and (model["mean_estimate"] > 0.99).all()
    text = (tmp_path / "budget" / "budget.md").read_text()
    assert "## Many wordings: the PromptEval-style model" in text and "tuned on the" in text
    assert (table["items"] == "reported").all()


def test_simulation_at_the_full_budget_returns_the_empirical_quantiles():
    # budget 1.0: every cell is judged, the filled grid is the grid, so every method's estimate is the
    # full grid's quantile exactly (wordings' means 1/4, 2/4, 3/4 on 4 items -> 5%: 0.25 + 0.1 * 0.25)
    from promptlottery.analysis.budget.wording_model_simulation import simulate_wording_model, split_items

    y = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]], dtype=float)
    # the reported items are the split's other half: duplicate the grid so they are these 4 rows
    val, rep = split_items(8, 0.5, 0)
    grid = np.zeros((8, 3))
    grid[rep] = y
    grid[val] = 1.0  # the validation items agree everywhere: were they reported, every mean would move
    table = simulate_wording_model(
        grid,
        None,
        items=list("abcdefgh"),
        variants=["P1", "P2", "P3"],
        budgets=[1.0],
        ranks=(0,),
        n_sim=2,
        n_resamples=2,
        validation_share=0.5,
    )
    assert (table["items"] == "reported").all() and (table["n_reported"] == 4).all()
    q05 = table[table["statistic"] == "q05"]
    assert np.allclose(q05["full"], 0.275) and np.allclose(q05["mean_estimate"], 0.275)
    assert np.allclose(table["rmse"], 0.0)


def test_a_plan_that_judges_no_reported_cell_is_counted_not_fitted():
    """A pairwise plan at a low budget can judge both orders of no (pair, wording) among the reported
    pairs: it gives no estimate (counted in ``n_plans_without_cells``), the other plans still do. Found on
    the fast 1.5B's 60 LLMBar Natural pairs, where one such plan stopped the whole budget analysis."""
    from promptlottery.analysis.budget.wording_model_simulation import simulate_wording_model, split_items

    y = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]], dtype=float)
    val, rep = split_items(8, 0.5, 0)
    grid = np.zeros((8, 3))
    grid[rep] = y
    grid[val] = 1.0

    def mask_of(
        budget, seed
    ):  # budget 0.1: nothing judged; 1.0: every cell in plan 0 (seed 1), none in plan 1
        return np.full(grid.shape, budget == 1.0 and seed == 1), budget

    table = simulate_wording_model(
        grid, None, items=list("abcdefgh"), variants=["P1", "P2", "P3"], budgets=[0.1, 1.0], ranks=(0,),
        n_sim=2, n_resamples=2, validation_share=0.5, mask_of=mask_of,
    )  # fmt: skip
    low, high = table[table["budget"] == 0.1], table[table["budget"] == 1.0]
    assert (low["n_plans_without_cells"] == 2).all() and low["mean_estimate"].isna().all()
    # plan 0 judges every cell -> the empirical quantiles; plan 1 judges none and is left out, not averaged in
    assert (high["n_plans_without_cells"] == 1).all()
    q05 = high[high["statistic"] == "q05"]
    assert np.allclose(q05["mean_estimate"], 0.275) and np.allclose(high["rmse"], 0.0)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"model_ranks": [-1]}, "analysis.model_ranks=[-1]: must be whole numbers in 0-3"),
        ({"model_ranks": [1.5]}, "analysis.model_ranks=[1.5]: must be whole numbers in 0-3"),
        ({"model_embedding": "bert"}, "analysis.model_embedding='bert': must be one of minilm, words, none"),
        ({"model_validation_share": 1.0}, "analysis.model_validation_share=1.0: must be in (0, 1)"),
    ],
)
def test_bad_model_option_is_one_line_config_error(bad, message):
    from promptlottery.analysis.budget.report import BudgetOptions
    from promptlottery.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        BudgetOptions.from_dict(bad)
    assert str(exc.value) == message


def test_items_split_into_validation_and_reported_is_seeded_and_disjoint():
    from promptlottery.analysis.budget.wording_model_simulation import split_items

    val, rep = split_items(10, 0.3, seed=4)
    assert (
        len(val) == 3 and len(rep) == 7 and not set(val) & set(rep) and set(val) | set(rep) == set(range(10))
    )
    assert [a.tolist() for a in split_items(10, 0.3, seed=4)] == [val.tolist(), rep.tolist()]
    with pytest.raises(ValueError, match="cannot be split"):
        split_items(3, 0.5, seed=0)


def test_penalties_are_tuned_on_held_out_cells():
    from promptlottery.analysis.budget.wording_model_simulation import tune_penalties

    # y = 1 under wordings 0-1 and 0 under 2-3 on every item: a wording effect and nothing else, so the
    # least penalised fit predicts the held-out cells best (a large lam shrinks b_j towards 1/2)
    y = np.tile([1.0, 1.0, 0.0, 0.0], (8, 1))
    pen = tune_penalties(y, rank=0, seed=1)
    assert pen["tuned"] and pen["lam"] == 0.01 and pen["n_heldout"] == 8 * 2
    assert pen["losses"][(0.01, 1.0)] < pen["losses"][(10.0, 1.0)]
    # a grid at 1/2 everywhere: every penalty predicts 1/2, every loss is log 2, the tie goes to the largest
    # (rank 0 starts at the optimum mu = logit(1/2) = 0 with zero effects, so the losses are equal exactly)
    flat = tune_penalties(np.full((6, 4), 0.5), rank=0, seed=0)
    assert list(flat["losses"].values()) == pytest.approx([np.log(2)] * 4, abs=1e-12)
    assert flat["lam"] == 10.0
    # at rank 1 the interaction's penalty is a candidate too: 4 x 3 pairs
    assert len(tune_penalties(np.full((6, 4), 0.5), rank=1, seed=0)["losses"]) == 12
    # one judged cell per item: none can be held out, the defaults are named untuned
    one = tune_penalties(np.array([[1.0, np.nan], [np.nan, 0.0]]), seed=0)
    assert (one["tuned"], one["lam"]) == (False, 0.1)
