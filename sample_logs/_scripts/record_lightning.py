"""Record a healthy PyTorch Lightning 2.x run (TQDMProgressBar forced, since rich is installed; tqdm bar with logged metrics in its postfix).

Tiny random-init MLP regression on CPU, `self.log(..., prog_bar=True)` for the train loss and the
validation loss; run by record_lightning.sh with /work/recvenv, console to train.log.
"""

import sys

import pytorch_lightning as pl
import torch

pl.seed_everything(0)
w_true = 0.5 * torch.randn(16, 1)


def data(n: int, seed: int) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x @ w_true), batch_size=16)


class Net(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 1))

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


trainer = pl.Trainer(max_epochs=3, accelerator="cpu", log_every_n_steps=1, logger=pl.loggers.CSVLogger(sys.argv[1], name="csv"),
                     enable_checkpointing=False,
                     callbacks=[pl.callbacks.TQDMProgressBar(refresh_rate=1)])
trainer.fit(Net(), data(320, 1), data(64, 2))
