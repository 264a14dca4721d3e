"""A tiny regression trained by PyTorch Lightning on the CPU.

Env: STEPS (default 10), SLEEP (seconds per step), SAVE_ON_SIGNAL=1 adds Lightning's own
OnExceptionCheckpoint (it saves when SIGTERM arrives). Checkpoints every 3 steps to
$RGT_CKPT_DIR; the default logger (CSVLogger without tensorboard) writes metrics.csv.
"""

import os
import time

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint, OnExceptionCheckpoint


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, index):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        time.sleep(float(os.environ.get("SLEEP", "0")))
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


ckpt = os.environ["RGT_CKPT_DIR"]
torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
callbacks = [ModelCheckpoint(dirpath=ckpt, every_n_train_steps=3, save_top_k=-1)]
if os.environ.get("SAVE_ON_SIGNAL"):
    callbacks.append(OnExceptionCheckpoint(dirpath=ckpt))
trainer = pl.Trainer(max_steps=int(os.environ.get("STEPS", "10")), accelerator="cpu",
                     log_every_n_steps=2, callbacks=callbacks, enable_model_summary=False,
                     enable_progress_bar=False)
trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=8))
os.makedirs("final", exist_ok=True)
trainer.save_checkpoint("final/model.ckpt")
