"""Optuna search over the gate classifier's hyperparameters (``sweeps/tune_gate.py``).

TPE sampler, median pruner fed by Lightning's validation epochs, objective the validation metric
(``gate.tune.metric``: the paper's ``val/mcc_plus_balanced_accuracy``, or ``val/mcc``, ...;
``gating.objective``; the best_params.json names the objective and the split it used), storage a URL (SQLite file by
default; a PostgreSQL URL lets many workers share one study, each running ``gate.tune.n_trials``;
``make_storage``). Each trial's config is composed with Hydra's compose API from ``conf/`` with
the sampled values as overrides, so a trial is exactly
``python -m run +gate=selective <overrides> <trial overrides>``. The data (examples, texts, split)
is prepared once and shared by the trials.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.checks import check_choice
from promptlottery.gating.config import GateConfig
from promptlottery.gating.objective import OBJECTIVES, SPLITS, objective_name

logger = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parents[3] / "conf"
METRICS = tuple(OBJECTIVES)  # val/mcc_plus_balanced_accuracy (the paper's), val/mcc, ... (gating.objective)


def pruning_callback(trial, monitor: str):
    """A Lightning callback reporting ``monitor`` to ``trial`` after each validation run; prunes.

    (optuna-integration's PyTorchLightningPruningCallback, written out: that package may be absent.)
    """
    import lightning as L
    import optuna

    class OptunaPruning(L.Callback):
        def __init__(self):
            self.step = 0

        def on_validation_end(self, trainer, pl_module):
            if trainer.sanity_checking:
                return
            value = trainer.callback_metrics.get(monitor)
            if value is None:
                logger.warning(
                    "pruning: metric %s not logged; known: %s", monitor, sorted(trainer.callback_metrics)
                )
                return
            value = float(value)
            step = self.step
            self.step += 1
            trial.report(value if math.isfinite(value) else float("nan"), step)
            if trial.should_prune():
                raise optuna.TrialPruned(
                    f"trial {trial.number} pruned at validation {step}: {monitor}={value:.4f}"
                )

    return OptunaPruning()


def sample_overrides(trial, space: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """Hydra overrides (``path=value``) for one trial, and the sampled values by path."""
    overrides, by_path = [], {}
    for name, spec in space.items():
        kind = spec.get("type")
        if kind == "float":
            v = trial.suggest_float(
                name, float(spec["low"]), float(spec["high"]), log=bool(spec.get("log", False))
            )
        elif kind == "int":
            v = trial.suggest_int(name, int(spec["low"]), int(spec["high"]), log=bool(spec.get("log", False)))
        elif kind == "categorical":
            v = trial.suggest_categorical(name, list(spec["choices"]))
        else:
            raise ValueError(f"gate.tune.space.{name}: type must be float, int or categorical, got {kind!r}")
        path = spec.get("path")
        if not path:
            raise ValueError(f"gate.tune.space.{name} needs a `path` (e.g. gate.classifier.lr)")
        overrides.append(f"{path}={json.dumps(v)}")
        by_path[path] = v
    return overrides, by_path


def compose(overrides: list[str]):
    """Compose ``conf/config.yaml`` with ``overrides`` (Hydra's compose API)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from promptlottery.config import register_configs
    from promptlottery.gating.config import register_configs as register_gate_schema

    register_configs()
    register_gate_schema()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))


def make_storage(url: str, *, heartbeat_s: int | None, grace_s: int | None, retries: int | None):
    """The study's storage; with ``heartbeat_s`` every running trial beats a heartbeat.

    A trial whose worker died (no beat for ``grace_s``) is marked FAIL by the next worker that
    starts a trial on the study, and re-queued with the same parameters up to ``retries`` times
    (Optuna's ``RetryHeartbeatStaleTrialCallback``): a killed worker loses its trial's time, not
    the trial.
    """
    import optuna
    import sqlalchemy.exc

    kwargs: dict[str, Any] = {}
    if heartbeat_s:
        kwargs = {
            "heartbeat_interval": int(heartbeat_s),
            "grace_period": int(grace_s or 2 * heartbeat_s),
            "heartbeat_stale_trial_callback": optuna.storages.RetryHeartbeatStaleTrialCallback(
                max_retry=retries
            ),
        }
    engine = None if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=engine, **kwargs)
        except sqlalchemy.exc.IntegrityError:
            # workers started together on an empty database race to create Optuna's tables (a
            # duplicate CREATE TYPE on PostgreSQL): the loser finds them made on its next try
            if attempt == 2:
                raise
            time.sleep(1.0 + attempt)


def train_trial(ccfg, data, trial, metric: str, tokenizer, logger_cfg: dict, study_name: str, by_path: dict):
    """One trial's training, pruned by Optuna; with ``logger=wandb`` one W&B run per trial (offline
    by default), grouped by the study, holding Lightning's per-epoch curves."""
    from promptlottery.gating.model import lightning_wandb_logger, train_classifier

    lw = lightning_wandb_logger(
        logger_cfg,
        name=f"{study_name}/trial-{trial.number}",
        group=f"tune_gate/{study_name}",
        job_type="tune_trial",
        config={"trial": trial.number, **by_path},
    )
    try:
        return train_classifier(
            ccfg,
            data.train,
            data.val,
            callbacks=[pruning_callback(trial, metric)],
            tokenizer=tokenizer,
            loggers=[lw] if lw else None,
        )
    finally:
        if lw is not None:
            lw.experiment.finish()


def val_mcc_interval(res, val: pd.DataFrame, g: GateConfig) -> dict[str, float]:
    """The trial's validation MCC (cut 0.5, the best epoch's weights) with its item-cluster bootstrap
    interval (``gate.n_bootstrap``, ``gate.bootstrap_level``; clusters = ``item_key``): how far the
    search's winner stands from chance on these few validation items. Keys ``mcc``, ``mcc_lo``,
    ``mcc_hi``, ``n_rows``."""
    from promptlottery.gating.frontier import mcc_interval
    from promptlottery.gating.model import predict_proba

    if not len(val):
        return {}
    return mcc_interval(
        val["in_cluster"].to_numpy(),
        predict_proba(res, val),
        val["item_key"].to_numpy(),
        n_resamples=g.n_bootstrap,
        level=g.bootstrap_level,
        seed=g.seed,
    )


def with_gate(overrides: list[str]) -> list[str]:
    """Add ``+gate=selective`` unless the overrides pick a gate preset themselves."""
    if any(o.lstrip("+~").startswith("gate=") for o in overrides):
        return list(overrides)
    return ["+gate=selective", *overrides]


def run_study(overrides: list[str]) -> dict[str, Any]:
    import optuna
    from omegaconf import OmegaConf

    from promptlottery.gating.model import ClassifierConfig, load_tokenizer
    from promptlottery.gating.split import prepare
    from promptlottery.tracking.wandb_logger import make_tracker

    t0 = time.perf_counter()
    overrides = with_gate(overrides)
    cfg = compose(overrides)
    config = OmegaConf.to_container(cfg, resolve=True)
    g = GateConfig.from_dict(config["gate"])
    tune = dict(g.tune)
    metric = tune.get("metric", "val/mcc")
    check_choice("gate.tune.metric", metric, METRICS)
    direction = tune.get("direction", "minimize" if metric == "val/loss" else "maximize")
    out = Path(tune.get("output_dir") or "outputs/tune_gate")
    out.mkdir(parents=True, exist_ok=True)
    storage = tune.get("storage") or f"sqlite:///{(out / 'optuna.db').resolve()}"
    study_name = tune.get("study_name") or f"gate_{g.classifier.name}"
    study = _create_study(tune, storage, study_name, direction)
    data = prepare(g)
    tokenizer = load_tokenizer(g.classifier)
    space = tune.get("space") or {}
    fixed = [
        f"gate.classifier.max_epochs={int(tune.get('epochs', 2))}",
        f"gate.classifier.monitor={metric}",
        f"gate.classifier.monitor_mode={'min' if direction == 'minimize' else 'max'}",
    ]

    worker = f"{socket.gethostname()}:{os.getpid()}"

    def objective(trial) -> float:
        trial_overrides, by_path = sample_overrides(trial, space)
        tcfg = compose([*overrides, *fixed, *trial_overrides])
        ccfg = ClassifierConfig.from_dict(OmegaConf.to_container(tcfg.gate.classifier, resolve=True))
        trial.set_user_attr("overrides", trial_overrides)
        trial.set_user_attr("worker", worker)  # which process ran it, when many share the study
        res = train_trial(ccfg, data, trial, metric, tokenizer, config["logger"], study_name, by_path)
        for k, v in res.best.items():
            trial.set_user_attr(k.replace("/", "_"), v)
        for k, v in val_mcc_interval(res, data.val, g).items():
            trial.set_user_attr(f"val_{k}", v)
        trial.set_user_attr("seconds", res.seconds)
        value = res.best.get(metric)
        logger.info("trial=%d %s=%s params=%s (%.0f s)", trial.number, metric, value, by_path, res.seconds)
        if value is None or not math.isfinite(value):
            raise optuna.TrialPruned(f"no finite {metric}")
        return float(value)

    study.optimize(
        objective, n_trials=int(tune.get("n_trials", 4)), timeout=tune.get("timeout_s"), gc_after_trial=True
    )

    head = {
        "study_name": study_name,
        "classifier": g.classifier.name,
        "storage": storage if storage.startswith("sqlite") else storage.split("@")[-1],
        "metric": metric,
        "objective": objective_name(metric),
        "split": f"{g.split} - {SPLITS[str(g.split)]}",
        "direction": direction,
    }
    summary, trials = _write_outputs(study, out, space, head, t0=t0, overrides=overrides)
    tracker = make_tracker(
        config["logger"], config=config, name=f"tune_gate/{study_name}", group="gate", job_type="tune_gate"
    )
    tracker.log_metrics(
        {
            "tune": {k: summary[k] for k in ("n_trials", "n_complete", "n_pruned", "seconds")},
            "best_value": summary.get("best_value"),
            "best_params": summary.get("best_params", {}),
        }
    )
    tracker.log_table("trials", _loggable(trials))
    tracker.finish()
    summary["output_dir"] = str(out)
    return summary


def _create_study(tune: dict, storage: str, study_name: str, direction: str):
    """The Optuna study (loaded if it exists): TPE sampler, median pruner, the storage's heartbeat.

    The sampler's seed is ``gate.tune.sampler_seed`` plus the number of trials the study already
    holds (:func:`worker_seed`): a second worker joining the study, or a resumed search, would
    otherwise replay the first worker's random start-up draws and train the same trials again (two
    workers on the CPU study did: trials 0 and 1 had identical parameters)."""
    import optuna

    pr = tune.get("pruner") or {}
    study = optuna.create_study(
        storage=make_storage(
            storage,
            heartbeat_s=tune.get("heartbeat_s"),
            grace_s=tune.get("grace_s"),
            retries=tune.get("failed_trial_retries"),
        ),
        study_name=study_name,
        direction=direction,
        load_if_exists=True,
        pruner=optuna.pruners.MedianPruner(
            n_startup_trials=int(pr.get("n_startup_trials", 5)),
            n_warmup_steps=int(pr.get("n_warmup_steps", 0)),
        ),
    )
    study.sampler = optuna.samplers.TPESampler(
        seed=worker_seed(tune.get("sampler_seed"), len(study.trials)),
        n_startup_trials=int(tune.get("tpe_startup_trials", 10)),
    )
    return study


def worker_seed(seed: int | None, n_trials_before: int) -> int | None:
    """The sampler seed of a worker joining a study that holds ``n_trials_before`` trials: a fresh
    study keeps ``seed`` (reproducible), a joined or resumed one draws anew; None stays random.

    >>> worker_seed(0, 0), worker_seed(0, 3), worker_seed(None, 3)
    (0, 3, None)
    """
    return None if seed is None else int(seed) + int(n_trials_before)


def _write_outputs(study, out: Path, space: dict, head: dict, *, t0: float, overrides: list[str]):
    """trials.csv / .md, best_overrides.txt and best_params.json (the summary: ``head``, the trial
    counts, then the best trial's values), through the one writer (staged, then published together:
    a search killed while writing them leaves the previous files). Returns the summary and the trials
    table."""
    import optuna

    from promptlottery.gating.report import to_markdown
    from promptlottery.tracking.staging import staged_outputs

    trials = study.trials_dataframe()
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    summary: dict[str, Any] = {
        **head,
        "n_trials": len(study.trials),
        "n_complete": len(complete),
        "n_pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials),
        "seconds": round(time.perf_counter() - t0, 1),
        "overrides": overrides,
    }
    if complete:
        best = study.best_trial
        params_by_path = {space[n]["path"]: v for n, v in best.params.items() if n in space}
        summary.update(
            best_trial=best.number,
            best_value=best.value,
            best_params=best.params,
            params_by_path=params_by_path,
            best_overrides=[f"{p}={json.dumps(v)}" for p, v in params_by_path.items()],
            best_user_attrs=best.user_attrs,
        )
        if "val_mcc_lo" in best.user_attrs:  # the winner's validation MCC with its interval
            summary["best_val_mcc_interval"] = {
                k: best.user_attrs[f"val_{k}"] for k in ("mcc", "mcc_lo", "mcc_hi", "n_rows")
            }
    with staged_outputs(out) as staging:
        trials.to_csv(staging / "trials.csv", index=False)
        (staging / "trials.md").write_text(to_markdown(trials.astype(object).where(trials.notna(), None)))
        if complete:
            (staging / "best_overrides.txt").write_text("\n".join(summary["best_overrides"]) + "\n")
        (staging / "best_params.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary, trials


def _loggable(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in df.columns:
        if df[c].dtype.kind in "mM":  # timedelta / datetime: W&B tables want plain values
            df[c] = df[c].astype(str)
    return df


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    for noisy in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    s = run_study(argv)
    print(
        f"tune_gate study={s['study_name']} metric={s['metric']} trials={s['n_trials']} "
        f"complete={s['n_complete']} pruned={s['n_pruned']} seconds={s['seconds']}"
    )
    if "best_value" in s:
        print(
            f"tune_gate best_trial={s['best_trial']} {s['metric']}={s['best_value']:.4f} params={s['best_params']}"
        )
        print(f"tune_gate best overrides: {' '.join(s['best_overrides'])}")
    if "best_val_mcc_interval" in s:
        m = s["best_val_mcc_interval"]
        print(
            f"tune_gate best trial's validation MCC (cut 0.5) = {m['mcc']:.3f} [{m['mcc_lo']:.3f}, "
            f"{m['mcc_hi']:.3f}] on {m['n_rows']} rows (item-cluster bootstrap; the test items untouched)"
        )
    print(f"tune_gate output_dir={s['output_dir']} (best_params.json, trials.csv, trials.md)")
    return 0
