"""A Lightning Trainer as a new user runs one (issue 54): 3 epochs of 20
batches, a validation of 5 batches after each, the loss on the progress
bar, as the library's defaults print it (with rich installed, Lightning
draws its RichProgressBar). A step sleeps 50 ms, as a small real model's
would take, so the bar is drawn while it runs. Needs torch and lightning.

usage: python lightning_trainer.py
"""

import time

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)

    def training_step(self, batch, i):
        time.sleep(0.05)
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, i):
        time.sleep(0.05)
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


train = DataLoader(TensorDataset(torch.randn(640, 32), torch.randn(640, 1)), batch_size=32)
val = DataLoader(TensorDataset(torch.randn(160, 32), torch.randn(160, 1)), batch_size=32)
L.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False).fit(Model(), train, val)
