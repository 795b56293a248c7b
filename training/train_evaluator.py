#!/usr/bin/env python
"""Fine-tune FIND's unit-test judge ("vicuna-evaluator") with accelerate + peft.

    python training/train_evaluator.py --config training/configs/cpu.yaml
    accelerate launch --config_file training/configs/single_gpu.yaml training/train_evaluator.py \
        --config training/configs/vicuna.yaml

The flags are those of ``findbench train-judge`` (:class:`findbench.judge.train.TrainArgs`,
``--lora-r``); ``--config file.yaml`` reads them from flat YAML (flags on the command line win).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from findbench.judge.config import parse_train_args
from findbench.judge.train import train_judge


def main(argv: Sequence[str] | None = None) -> str:
    """Parse the flags, train on every process, return the judge folder."""
    from accelerate import PartialState

    args = parse_train_args(argv)
    rank0 = PartialState().is_main_process
    logging.basicConfig(
        level=logging.INFO if rank0 else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return train_judge(args)


if __name__ == "__main__":
    main()
