"""A tiny GPT-2 trained by Hugging Face Trainer on the CPU: random init, no downloads.

Env: STEPS (default 6), SLEEP (seconds per step), SAVE_ON_SIGNAL=1 adds rgt's callback.
Checkpoints go to $RGT_CKPT_DIR (checkpoint-N, every 3 steps); the model to final/.
"""

import os
import time

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_utils import get_last_checkpoint


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class Slow(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(float(os.environ.get("SLEEP", "0")))


ckpt = os.environ["RGT_CKPT_DIR"]
config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                    bos_token_id=0, eos_token_id=0)
callbacks = [Slow()]
if os.environ.get("SAVE_ON_SIGNAL"):
    from rgt.ckpt.hf import SaveOnSignal

    callbacks.append(SaveOnSignal())
args = TrainingArguments(output_dir=ckpt, max_steps=int(os.environ.get("STEPS", "6")),
                         per_device_train_batch_size=4, save_steps=3, logging_steps=2,
                         report_to=[], use_cpu=True, seed=0)
trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=Tokens(),
                  callbacks=callbacks)
trainer.train(resume_from_checkpoint=get_last_checkpoint(ckpt))
trainer.save_model("final")
