"""Record a loguru `logger.catch` traceback (better_exceptions layout) around a real torch error.

Run by loguru_record.sh with the torch CPU recording venv and loguru on PYTHONPATH.
"""

import sys

import torch
from loguru import logger

logger.remove()
logger.add(sys.stderr, colorize=False, backtrace=True, diagnose=True)


def train_step(model, batch):
    return model(batch).sum()


@logger.catch(reraise=False)
def main():
    model = torch.nn.Embedding(10, 4)
    batch = torch.tensor([[1, 2, 12]])
    logger.info("step 1")
    train_step(model, batch)


if __name__ == "__main__":
    main()
