"""Entry point: `python -m run ...` from the repo root (Hydra composes conf/)."""

import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from promptlottery.stages import register_configs

register_configs()
log = logging.getLogger("promptlottery")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from promptlottery import stages

    out = HydraConfig.get().runtime.output_dir
    record = stages.main(cfg, out)
    log.info(
        "stage=%s output_dir=%s status=%s calls=%s", cfg.stage, out, record.get("status"), record.get("calls")
    )


if __name__ == "__main__":
    from promptlottery.tracking.secrets import SecretOnCommandLine, check_command_line

    # `python -m run +experiment=x -m dry_run=true`: argparse rejects overrides on both sides of -m,
    # so the flag is moved in front of them
    flags = ("-m", "--multirun")
    sys.argv = [
        sys.argv[0],
        *[a for a in sys.argv[1:] if a in flags],
        *[a for a in sys.argv[1:] if a not in flags],
    ]
    from promptlottery.errors import UserError
    from promptlottery.stages import check_composition
    from promptlottery.stages.study import check_experiment_sweep

    try:  # before Hydra, which copies every override into .hydra/ and its logs
        check_command_line(sys.argv[1:])
        check_experiment_sweep(sys.argv[1:])  # `+experiment=a,b -m` would drop their own sweeps
        # a wrong type or an unknown config group: one line, not Hydra's report
        check_composition(sys.argv[1:], config_dir=Path(__file__).parent / "conf")
    except (SecretOnCommandLine, UserError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    main()
